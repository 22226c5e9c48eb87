"""The applications built on the library: what people run rather than import.

* :mod:`.cli` - the ``floodmark`` command (``demo``, ``replay``, ``explain``, ``advise``);
* :mod:`.demo`, :mod:`.replay` - the clickstream job on the simulator, and history files through a pipeline;
* :mod:`.clickstream_source` - the clickstream simulator as a Spark streaming data source (the demo's input);
* :mod:`.kafka_demo` - ``floodmark demo --kafka``, from a development checkout only (its broker is in
  ``devtools/floodmark_dev``, which nothing else here imports);
* :mod:`.inspection` - ``floodmark explain`` on a run's files (no Spark needed);
* :mod:`.advisor` - the lateness advisor (bound and allowed lateness for a target late fraction);
* :mod:`.config` - a pipeline as a JSON/TOML file; :mod:`.outputs` - reading a run's outputs back;
* :mod:`.live`, :mod:`.plot` - the live terminal view and the *Streaming Systems* timeline PNG.

Nothing in :mod:`floodmark.core`, :mod:`floodmark.driver` or :mod:`floodmark.spark` imports from here.
"""
