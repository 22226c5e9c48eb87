"""Where results go: the ``foreachBatch`` function, the sinks (files, tables, Kafka, a function), the reader of
the stateful host's output blocks, and reading a query's file outputs back."""
