"""The stateful host: the levels of stateful operators that run the core's window operator per bucket, where a
bucket's operator state lives, and how a batch's tasks get their control entry. Imports nothing on its own: the
level processor's module is unpickled where Spark plans the query."""
