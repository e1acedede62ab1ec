// A Flink 2.x job the compatibility suite runs unmodified against a broker
// (compat_tests/test_flink.py): Flink's Kafka connector reading a topic and writing it,
// upper-cased, to another, exactly once with checkpoints, through a failure of its own.
//
//   java FlinkCopyJob --bootstrap HOST:PORT --input IN --output OUT --group G
//                     --txn-prefix P [--fail-after N]
//
// A local mini-cluster (parallelism 2). The source is bounded (it reads IN from the
// earliest offsets up to the end offsets it finds at start, read_committed); the sink is
// KafkaSink with DeliveryGuarantee.EXACTLY_ONCE: records go out in Kafka transactions
// committed when a checkpoint (every 500 ms) completes, and the job's last transaction
// with its final checkpoint. --fail-after N: in the first attempt, each subtask of the
// map throws once it has passed N records since a checkpoint completed (so records of an
// open transaction are out); the job restarts from that checkpoint (fixed-delay restart
// strategy), the sink aborts the failed attempt's transactions and writes again. A
// read_committed reader of OUT then sees every line exactly once.
//
// Standard output: "INDUCED FAILURE <subtask>" before the throw, "JOB FINISHED" at the end.

import java.time.Duration;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.serialization.SimpleStringSchema;
import org.apache.flink.api.common.state.CheckpointListener;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.RestartStrategyOptions;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.core.execution.CheckpointingMode;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

public class FlinkCopyJob {
    /** Upper-cases; in the first attempt throws once after `failAfter` records past a
     *  completed checkpoint. Slowed down so checkpoints complete mid-stream: 2 ms a record,
     *  and 10 ms in the first attempt until a checkpoint completed, so a slow first
     *  checkpoint on a busy machine still comes before the bounded source runs dry (the
     *  map cannot simply wait for it: it runs in the task's thread, which the checkpoint
     *  needs). */
    static final class UpperCaseFailingOnce extends RichMapFunction<String, String> implements CheckpointListener {
        private final int failAfter;
        private transient boolean checkpointed;
        private transient int sinceCheckpoint;
        private transient boolean firstAttempt;

        UpperCaseFailingOnce(int failAfter) {
            this.failAfter = failAfter;
        }

        @Override
        public void open(OpenContext context) {
            firstAttempt = getRuntimeContext().getTaskInfo().getAttemptNumber() == 0;
        }

        @Override
        public String map(String line) throws Exception {
            Thread.sleep(firstAttempt && !checkpointed ? 10 : 2);
            sinceCheckpoint++;
            if (failAfter > 0 && firstAttempt && checkpointed && sinceCheckpoint >= failAfter) {
                int subtask = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
                System.out.println("INDUCED FAILURE " + subtask);
                System.out.flush();
                throw new RuntimeException("induced failure in subtask " + subtask);
            }
            return line.toUpperCase();
        }

        @Override
        public void notifyCheckpointComplete(long checkpointId) {
            checkpointed = true;
            sinceCheckpoint = 0;
        }
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = null, input = null, output = null, group = null, prefix = null;
        int failAfter = 0;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--bootstrap": bootstrap = args[++i]; break;
                case "--input": input = args[++i]; break;
                case "--output": output = args[++i]; break;
                case "--group": group = args[++i]; break;
                case "--txn-prefix": prefix = args[++i]; break;
                case "--fail-after": failAfter = Integer.parseInt(args[++i]); break;
                default: throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        Configuration conf = new Configuration();
        conf.set(RestartStrategyOptions.RESTART_STRATEGY, "fixed-delay");
        conf.set(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_ATTEMPTS, 3);
        conf.set(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_DELAY, Duration.ofSeconds(1));
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(2);
        env.enableCheckpointing(500, CheckpointingMode.EXACTLY_ONCE);

        KafkaSource<String> source = KafkaSource.<String>builder()
            .setBootstrapServers(bootstrap)
            .setTopics(input)
            .setGroupId(group)
            .setStartingOffsets(OffsetsInitializer.earliest())
            .setBounded(OffsetsInitializer.latest())
            .setProperty("isolation.level", "read_committed")
            .setValueOnlyDeserializer(new SimpleStringSchema())
            .build();
        KafkaSink<String> sink = KafkaSink.<String>builder()
            .setBootstrapServers(bootstrap)
            .setRecordSerializer(KafkaRecordSerializationSchema.builder()
                .setTopic(output)
                .setValueSerializationSchema(new SimpleStringSchema())
                .build())
            .setDeliveryGuarantee(DeliveryGuarantee.EXACTLY_ONCE)
            .setTransactionalIdPrefix(prefix)
            .setProperty("transaction.timeout.ms", "60000")
            .build();

        env.fromSource(source, WatermarkStrategy.noWatermarks(), "lines")
            .map(new UpperCaseFailingOnce(failAfter))
            .sinkTo(sink);
        env.execute("trafka-flink-copy");
        System.out.println("JOB FINISHED");
        System.out.flush();
    }
}
