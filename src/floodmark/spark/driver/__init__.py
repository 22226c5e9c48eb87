"""The Spark driver side: the graph of sources and stages and its one physical builder (``Pipeline``), the
single-aggregation facade, the running query, sessions, and the driver's reads of Spark's checkpoint and of
Hadoop file systems."""
