package oracle;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import org.apache.flink.api.common.eventtime.SerializableTimestampAssigner;
import org.apache.flink.api.common.eventtime.Watermark;
import org.apache.flink.api.common.eventtime.WatermarkGenerator;
import org.apache.flink.api.common.eventtime.WatermarkGeneratorSupplier;
import org.apache.flink.api.common.eventtime.WatermarkOutput;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.FilterFunction;
import org.apache.flink.api.common.functions.JoinFunction;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.tuple.Tuple5;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.KeyedStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.co.ProcessJoinFunction;
import org.apache.flink.streaming.api.windowing.assigners.EventTimeSessionWindows;
import org.apache.flink.streaming.api.windowing.assigners.SlidingEventTimeWindows;
import org.apache.flink.streaming.api.windowing.assigners.TumblingEventTimeWindows;
import org.apache.flink.streaming.api.windowing.assigners.WindowAssigner;
import org.apache.flink.util.CloseableIterator;
import org.apache.flink.util.Collector;
import org.apache.flink.util.OutputTag;

/**
 * Java half of the Flink oracle: the DataStream interval join (KeyedStream.intervalJoin ->
 * IntervalJoinOperator), which PyFlink's Python DataStream API does not expose, the window join
 * (DataStream.join(...).window(...): a CoGroup over a window), and a KeyedProcessFunction with event-time timers on
 * punctuated watermarks (PyFlink's Python API has no custom watermark generator).
 * Event = Tuple5(side "L"/"R", key, ts ms, id, watermark_after ms or Long.MIN_VALUE for none).
 */
public class IntervalJoinOracle {

    public static final long NO_WM = Long.MIN_VALUE;

    static TypeInformation<Tuple5<String, String, Long, String, Long>> eventType() {
        return Types.TUPLE(Types.STRING, Types.STRING, Types.LONG, Types.STRING, Types.LONG);
    }

    /** One event per line: side \t k \t ts \t id \t watermark_after ("" for none). */
    static List<Tuple5<String, String, Long, String, Long>> parseEvents(String lines) {
        List<Tuple5<String, String, Long, String, Long>> evs = new ArrayList<>();
        for (String line : lines.split("\n")) {
            if (line.isEmpty()) {
                continue;
            }
            String[] f = line.split("\t", -1);
            long wm = f[4].isEmpty() ? NO_WM : Long.parseLong(f[4]);
            evs.add(Tuple5.of(f[0], f[1], Long.parseLong(f[2]), f[3], wm));
        }
        return evs;
    }

    /** Punctuated generator: after an event carrying watermark_after, emit exactly that watermark. */
    public static class PunctuatedGen implements WatermarkGenerator<Tuple5<String, String, Long, String, Long>> {
        @Override
        public void onEvent(Tuple5<String, String, Long, String, Long> e, long ts, WatermarkOutput out) {
            if (e.f4 != NO_WM) {
                out.emitWatermark(new Watermark(e.f4));
            }
        }

        @Override
        public void onPeriodicEmit(WatermarkOutput out) {
            // punctuated only
        }
    }

    public static class GenSupplier implements WatermarkGeneratorSupplier<Tuple5<String, String, Long, String, Long>> {
        @Override
        public WatermarkGenerator<Tuple5<String, String, Long, String, Long>> createWatermarkGenerator(Context ctx) {
            return new PunctuatedGen();
        }
    }

    /**
     * The events of {@code lines} in order, with their timestamps and each event's watermark after it: one task, every
     * record and watermark flushed at once, no periodic watermarks.
     */
    static DataStream<Tuple5<String, String, Long, String, Long>> events(StreamExecutionEnvironment env, String lines) {
        env.setParallelism(1);
        env.setBufferTimeout(0); // flush every record / watermark immediately
        env.getConfig().setAutoWatermarkInterval(0L); // no periodic watermarks at all
        WatermarkStrategy<Tuple5<String, String, Long, String, Long>> ws =
                WatermarkStrategy.forGenerator(new GenSupplier()).withTimestampAssigner(new TsAssigner());
        return env.fromData(parseEvents(lines), eventType())
                .name("events")
                .assignTimestampsAndWatermarks(ws).name("punctuated-watermarks");
    }

    /** Runs the job and returns what {@code rows} emitted, in order. */
    static List<String> collect(DataStream<String> rows, String job) throws Exception {
        List<String> out = new ArrayList<>();
        try (CloseableIterator<String> it = rows.executeAndCollect(job)) {
            while (it.hasNext()) {
                out.add(it.next());
            }
        }
        return out;
    }

    public static class TsAssigner implements SerializableTimestampAssigner<Tuple5<String, String, Long, String, Long>> {
        @Override
        public long extractTimestamp(Tuple5<String, String, Long, String, Long> e, long recordTs) {
            return e.f2;
        }
    }

    /** Sleeps before forwarding each event so that record/watermark arrival order at the join's two inputs is the source order. */
    public static class Pace implements MapFunction<Tuple5<String, String, Long, String, Long>, Tuple5<String, String, Long, String, Long>> {
        private final long pauseMs;

        public Pace(long pauseMs) {
            this.pauseMs = pauseMs;
        }

        @Override
        public Tuple5<String, String, Long, String, Long> map(Tuple5<String, String, Long, String, Long> e) throws Exception {
            if (pauseMs > 0) {
                Thread.sleep(pauseMs);
            }
            return e;
        }
    }

    public static class SideFilter implements FilterFunction<Tuple5<String, String, Long, String, Long>> {
        private final String side;

        public SideFilter(String side) {
            this.side = side;
        }

        @Override
        public boolean filter(Tuple5<String, String, Long, String, Long> e) {
            return side.equals(e.f0);
        }
    }

    public static class KeyOf implements KeySelector<Tuple5<String, String, Long, String, Long>, String> {
        @Override
        public String getKey(Tuple5<String, String, Long, String, Long> e) {
            return e.f1;
        }
    }

    public static class EmitPair extends ProcessJoinFunction<Tuple5<String, String, Long, String, Long>, Tuple5<String, String, Long, String, Long>, String> {
        @Override
        public void processElement(Tuple5<String, String, Long, String, Long> l, Tuple5<String, String, Long, String, Long> r,
                                   Context ctx, Collector<String> out) {
            out.collect("P\t" + l.f3 + "\t" + r.f3);
        }
    }

    public static class Tag implements MapFunction<Tuple5<String, String, Long, String, Long>, String> {
        private final String tag;

        public Tag(String tag) {
            this.tag = tag;
        }

        @Override
        public String map(Tuple5<String, String, Long, String, Long> e) {
            return tag + "\t" + e.f3;
        }
    }

    /**
     * @param lines one event per line: side \t k \t ts \t id \t watermark_after ("" for null)
     * @return result lines: "P\tleft\tright", "LL\tid", "LR\tid" in emission order
     */
    public static List<String> run(StreamExecutionEnvironment env, String lines, long lowerMs, long upperMs,
                                   long pauseMs) throws Exception {
        TypeInformation<Tuple5<String, String, Long, String, Long>> ti = eventType();
        DataStream<Tuple5<String, String, Long, String, Long>> src = events(env, lines).map(new Pace(pauseMs), ti).name("pace");

        KeyedStream<Tuple5<String, String, Long, String, Long>, String> left =
                src.filter(new SideFilter("L")).name("L").keyBy(new KeyOf(), Types.STRING);
        KeyedStream<Tuple5<String, String, Long, String, Long>, String> right =
                src.filter(new SideFilter("R")).name("R").keyBy(new KeyOf(), Types.STRING);

        OutputTag<Tuple5<String, String, Long, String, Long>> lateL = new OutputTag<>("late-left", ti);
        OutputTag<Tuple5<String, String, Long, String, Long>> lateR = new OutputTag<>("late-right", ti);

        SingleOutputStreamOperator<String> joined = left.intervalJoin(right)
                .between(Duration.ofMillis(lowerMs), Duration.ofMillis(upperMs))
                .sideOutputLeftLateData(lateL)
                .sideOutputRightLateData(lateR)
                .process(new EmitPair(), Types.STRING)
                .name("interval-join");

        DataStream<String> all = joined.union(
                joined.getSideOutput(lateL).map(new Tag("LL"), Types.STRING),
                joined.getSideOutput(lateR).map(new Tag("LR"), Types.STRING));

        return collect(all, "floodmark-interval-join-oracle");
    }

    public static class EmitWindowPair implements JoinFunction<Tuple5<String, String, Long, String, Long>,
            Tuple5<String, String, Long, String, Long>, String> {
        @Override
        public String join(Tuple5<String, String, Long, String, Long> l, Tuple5<String, String, Long, String, Long> r) {
            return "P\t" + l.f3 + "\t" + r.f3;
        }
    }

    /**
     * The window join: {@code kind} "tumbling" (size), "sliding" (size, slide) or "sessions" (size = the gap), with
     * {@code latenessMs} of allowed lateness.
     *
     * @return "P\tleft\tright" lines in emission order (a late firing emits its window's pairs again)
     */
    public static List<String> runWindowJoin(StreamExecutionEnvironment env, String lines, String kind, long sizeMs,
                                             long slideMs, long latenessMs, long pauseMs) throws Exception {
        TypeInformation<Tuple5<String, String, Long, String, Long>> ti = eventType();
        DataStream<Tuple5<String, String, Long, String, Long>> src = events(env, lines).map(new Pace(pauseMs), ti).name("pace");
        DataStream<Tuple5<String, String, Long, String, Long>> left = src.filter(new SideFilter("L")).name("L");
        DataStream<Tuple5<String, String, Long, String, Long>> right = src.filter(new SideFilter("R")).name("R");
        WindowAssigner<Object, ?> assigner;
        if (kind.equals("tumbling")) {
            assigner = TumblingEventTimeWindows.of(Duration.ofMillis(sizeMs));
        } else if (kind.equals("sliding")) {
            assigner = SlidingEventTimeWindows.of(Duration.ofMillis(sizeMs), Duration.ofMillis(slideMs));
        } else if (kind.equals("sessions")) {
            assigner = EventTimeSessionWindows.withGap(Duration.ofMillis(sizeMs));
        } else {
            throw new IllegalArgumentException("unknown window kind " + kind);
        }
        @SuppressWarnings({"unchecked", "rawtypes"})
        DataStream<String> joined = left.join(right)
                .where(new KeyOf())
                .equalTo(new KeyOf())
                .window((WindowAssigner) assigner)
                .allowedLateness(Duration.ofMillis(latenessMs))
                .apply(new EmitWindowPair(), Types.STRING);
        return collect(joined, "floodmark-window-join-oracle");
    }

    /**
     * floodmark.apps.searches.AbandonedSearches in Flink: per key, a search ends when no event follows for gapMs
     * (an event-time timer at the last event + gapMs), or at once when an event comes gapMs or more after the last.
     * Emits "S\tkey\tcount\tfirst\tlast\twatermark" (the watermark when the row was emitted).
     */
    public static class Abandoned extends KeyedProcessFunction<String, Tuple5<String, String, Long, String, Long>, String> {
        private final long gapMs;
        private transient ValueState<Long> last;
        private transient ValueState<Long> first;
        private transient ValueState<Long> count;

        public Abandoned(long gapMs) {
            this.gapMs = gapMs;
        }

        @Override
        public void open(OpenContext openContext) {
            last = getRuntimeContext().getState(new ValueStateDescriptor<>("last", Types.LONG));
            first = getRuntimeContext().getState(new ValueStateDescriptor<>("first", Types.LONG));
            count = getRuntimeContext().getState(new ValueStateDescriptor<>("count", Types.LONG));
        }

        @Override
        public void processElement(Tuple5<String, String, Long, String, Long> e, Context ctx, Collector<String> out)
                throws Exception {
            long ts = e.f2;
            Long l = last.value();
            if (l != null && ts >= l + gapMs) {
                ctx.timerService().deleteEventTimeTimer(l + gapMs);
                emit(ctx.getCurrentKey(), ctx.timerService().currentWatermark(), out);
                l = null;
            }
            if (l != null && ts <= l) {
                count.update(count.value() + 1);
                first.update(Math.min(first.value(), ts));
                return;
            }
            if (l != null) {
                ctx.timerService().deleteEventTimeTimer(l + gapMs);
            } else {
                count.update(0L);
                first.update(ts);
            }
            count.update(count.value() + 1);
            last.update(ts);
            ctx.timerService().registerEventTimeTimer(ts + gapMs);
        }

        @Override
        public void onTimer(long timestamp, OnTimerContext ctx, Collector<String> out) throws Exception {
            emit(ctx.getCurrentKey(), ctx.timerService().currentWatermark(), out);
        }

        private void emit(String key, long watermark, Collector<String> out) throws Exception {
            out.collect("S\t" + key + "\t" + count.value() + "\t" + first.value() + "\t" + last.value() + "\t" + watermark);
            last.clear();
            first.clear();
            count.clear();
        }
    }

    /**
     * @param lines one event per line: side (ignored) \t k \t ts \t id \t watermark_after ("" for null)
     * @return "S\tkey\tcount\tfirst\tlast\twatermark" lines in emission order
     */
    public static List<String> runTimers(StreamExecutionEnvironment env, String lines, long gapMs) throws Exception {
        DataStream<String> rows = events(env, lines)
                .keyBy(new KeyOf(), Types.STRING)
                .process(new Abandoned(gapMs), Types.STRING)
                .name("abandoned");
        return collect(rows, "floodmark-timers-oracle");
    }
}
