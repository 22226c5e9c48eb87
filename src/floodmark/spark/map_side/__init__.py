"""The map side, before the shuffle: validation (dead letters), split statistics and partial aggregates, in
Python over Arrow (``combiner``) or in the JVM (``jvm_combine``)."""
