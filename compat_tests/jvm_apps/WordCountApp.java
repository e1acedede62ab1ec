// A Kafka Streams application the compatibility suite runs unmodified against a broker
// (compat_tests/test_streams.py): a word count and a windowed word count over the same
// stream of lines, exactly-once.
//
//   java WordCountApp --input LINES --counts COUNTS --windows WINDOWED [name=value ...]
//
// Every name=value is a Streams setting (bootstrap.servers, application.id, state.dir,
// processing.guarantee, group.protocol, ...).
//
// Topology: lines -> words (flatMapValues) -> groupBy(word), which repartitions through
// the internal topic <application.id>-words-repartition, then
//   - count() into the state store "word-counts" (changelog <application.id>-word-counts-changelog)
//     -> COUNTS: key word, value the word's running count (8-byte big-endian long);
//   - windowedBy(10 s tumbling windows of the records' timestamps, a day of grace) count()
//     into "windowed-counts" -> WINDOWED: key "word@windowStartMs", value the running count.
// The record cache is off (statestore.cache.max.bytes=0): every word read produces exactly
// one update on each output, so with exactly_once_v2 a read_committed reader of COUNTS sees,
// for each word, exactly 1, 2, ..., n whatever crashed on the way.
//
// The test reads this program's standard output: "STATE <new state>" on every state change,
// "FATAL <exception>" when a stream thread dies (the client then shuts down).

import java.time.Duration;
import java.util.Arrays;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.WindowStore;

public class WordCountApp {
    public static void main(String[] args) throws Exception {
        String input = null, counts = null, windows = null;
        Properties props = new Properties();
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--input": input = args[++i]; break;
                case "--counts": counts = args[++i]; break;
                case "--windows": windows = args[++i]; break;
                default:
                    int eq = args[i].indexOf('=');
                    if (eq < 0) throw new IllegalArgumentException("not name=value: " + args[i]);
                    props.put(args[i].substring(0, eq), args[i].substring(eq + 1));
            }
        }
        if (input == null || counts == null || windows == null) {
            throw new IllegalArgumentException("--input, --counts and --windows are required");
        }

        StreamsBuilder builder = new StreamsBuilder();
        KGroupedStream<String, String> words = builder
            .stream(input, Consumed.with(Serdes.String(), Serdes.String()))
            .flatMapValues(line -> Arrays.asList(line.split(" ")))
            .groupBy((key, word) -> word, Grouped.with("words", Serdes.String(), Serdes.String()));
        words.count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("word-counts")
                .withKeySerde(Serdes.String()).withValueSerde(Serdes.Long()))
            .toStream()
            .to(counts, Produced.with(Serdes.String(), Serdes.Long()));
        words.windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofSeconds(10), Duration.ofDays(1)))
            .count(Materialized.<String, Long, WindowStore<Bytes, byte[]>>as("windowed-counts")
                .withKeySerde(Serdes.String()).withValueSerde(Serdes.Long()))
            .toStream()
            .map((window, count) -> KeyValue.pair(window.key() + "@" + window.window().start(), count))
            .to(windows, Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch done = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            System.out.println("STATE " + now);
            System.out.flush();
            if (now == KafkaStreams.State.NOT_RUNNING || now == KafkaStreams.State.ERROR) {
                done.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(exc -> {
            System.out.println("FATAL " + exc);
            System.out.flush();
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(20));
            done.countDown();
        }));
        streams.start();
        done.await();
        streams.close(Duration.ofSeconds(20));
        System.out.println("EXIT");
        System.out.flush();
    }
}
