"""Fixtures for every test folder: a real Kafka broker (started only by the tests that ask for it)."""

from floodmark_dev.kafka import kafka_broker_fixture

kafka_broker = kafka_broker_fixture()
