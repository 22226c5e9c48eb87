"""floodmark's development tools: real servers on loopback for its tests, benchmarks and ``floodmark demo --kafka``.

Not part of floodmark: this package lives in the source tree only (``devtools/``), is not in the wheel, and no
module of the ``floodmark`` package imports it (``floodmark demo --kafka`` imports it lazily and says what to do
when it is missing; ``tests/core/test_layout.py`` checks both). It is importable in a development checkout:
pytest puts ``devtools/`` on ``sys.path`` (``pythonpath`` in ``pyproject.toml``) and ``scripts/setup.sh`` adds
it to ``.venv`` with a ``.pth`` file, for the demo, the benchmarks and the tests' subprocesses.

* :mod:`floodmark_dev.kafka`: a real Kafka broker on loopback (``KafkaBroker``, a pytest fixture).
* :mod:`floodmark_dev.spark_cluster`: a Spark standalone master and workers on loopback.
* :mod:`floodmark_dev.processes`: a free loopback port, the tail of a log.
"""
