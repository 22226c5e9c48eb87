"""What floodmark's operators and its driver tell each other, declared once and engine-free.

* :mod:`.columns` - a column is a name and a neutral type (``long``, ``int``, ``double``, ``string``, ``bool``,
  ``binary``); each engine maps the types to its own (``floodmark.spark.plan.spark_fields``);
* :mod:`.wire` - the rows between the operators and to the driver: their kinds (``fm_kind``: IN, TICK, OUTPUT,
  PANE, LATE, BAD, STATS, GAUGE; ``fm_row``: the map-side combiner's RAW, PARTIAL, BAD_INPUT, SPLIT_STATS) and
  their internal ``fm_`` columns: the combiner's, the split statistics (STATS), the bucket gauges (GAUGE, and
  which gauge counts which emitted kind), the carrier and shuffle columns;
* :mod:`.output` - the columns users get besides their keys and aggregates: pane metadata, late-record
  metadata, dead-letter columns;
* :mod:`.control` - :class:`~.control.ControlEntry`, what the driver tells each micro-batch, and
  :class:`~.control.BucketGauges`, what each state bucket last reported, which the entry carries;
* :mod:`.files` - input files as history: their order and their partition folders' values.

Plain Python importing nothing else of floodmark: the driver, the core and the Spark executors all read it.
"""
