// The compat suite's Java column: Apache Kafka's own client (kafka-clients 3.9.2) behind
// line-delimited JSON, so Python scenarios can drive it.
//
//   java TrafkaCompat serve BOOTSTRAP
//       One request per stdin line, {"id": N, "op": "...", ...}; one answer per stdout line,
//       {"id": N, ...result} or {"id": N, "error": "...", "code": K, "kind": "..."}. Requests
//       run concurrently (a group member keeps polling while the scenario asks the admin
//       client about its group). Group members started with "member_start" live on threads
//       of this process and push {"ev": "member", "member": M, ...} lines as they change.
//       "exit" closes everything cleanly; end of stdin without it halts at once (the parent
//       died or killed us: no LeaveGroup, like a crash).
//
//   java TrafkaCompat worker --bootstrap B --group G [--client-id C] [--session-ms MS]
//                            [--instance ID] [--assignor NAME] TOPIC...
//       A consumer-group member reporting what the application sees as JSON lines, the same
//       events as compat_tests/test_groups_extended.py's Python workers. SIGTERM commits,
//       closes (LeaveGroup unless static) and exits; SIGKILL is the crash.
//
// Bytes (keys, values, header values) travel as base64, null as JSON null. Kafka errors
// carry their protocol error code (Errors.forException).
//
// Why the values below: see compat_tests/clients/base.py (SESSION_TIMEOUT_MS, LARGE_LIMIT...).

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonNull;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsSpec;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.NoOffsetForPartitionException;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetOutOfRangeException;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.UnknownServerException;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class TrafkaCompat {
    static final int LARGE_LIMIT = 4 * 1024 * 1024;
    static final int SESSION_TIMEOUT_MS = 6000;
    static final int HEARTBEAT_MS = 1000;
    static final int COMMIT_EVERY_MS = 300;
    static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(10);
    static final long ADMIN_TIMEOUT_S = 30;
    /** Client settings every producer, consumer and admin gets on top of the adapter's own:
     *  read from the properties file named by TRAFKA_COMPAT_CLIENT_CONFIG (security.protocol,
     *  ssl.truststore.*, sasl.jaas.config...), so the same verbs run against any listener. */
    static final Properties EXTRA = loadExtra();

    static Properties loadExtra() {
        Properties extra = new Properties();
        String path = System.getenv("TRAFKA_COMPAT_CLIENT_CONFIG");
        if (path != null && !path.isEmpty()) {
            try (java.io.FileInputStream in = new java.io.FileInputStream(path)) {
                extra.load(in);
            } catch (java.io.IOException e) {
                throw new RuntimeException("cannot read TRAFKA_COMPAT_CLIENT_CONFIG " + path, e);
            }
        }
        return extra;
    }

    private static PrintStream out;

    public static void main(String[] args) throws Exception {
        // stdout carries the protocol; anything a library prints goes to stderr.
        out = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
        System.setOut(System.err);
        dumpStacksOnSigusr1();
        if (args.length == 2 && args[0].equals("serve")) {
            new Server(args[1]).run();
        } else if (args.length > 0 && args[0].equals("worker")) {
            Worker.main(Arrays.copyOfRange(args, 1, args.length));
        } else if (args.length > 0 && args[0].equals("share_worker")) {
            ShareWorker.main(Arrays.copyOfRange(args, 1, args.length));
        } else {
            System.err.println("usage: TrafkaCompat serve BOOTSTRAP | worker --bootstrap B --group G ... TOPIC...");
            System.exit(2);
        }
    }

    static void emit(String line) {
        synchronized (TrafkaCompat.class) {
            out.print(line);
            out.print('\n');
            out.flush();
        }
    }

    static void emitAll(List<String> lines) {
        if (lines.isEmpty()) return;
        StringBuilder text = new StringBuilder();
        for (String line : lines) text.append(line).append('\n');
        synchronized (TrafkaCompat.class) {
            out.print(text);
            out.flush();
        }
    }

    /** The Python workers dump their threads on SIGUSR1 (faulthandler); so does this one. */
    static void dumpStacksOnSigusr1() {
        try {
            sun.misc.Signal.handle(new sun.misc.Signal("USR1"), sig -> {
                StringBuilder dump = new StringBuilder();
                for (Map.Entry<Thread, StackTraceElement[]> e : Thread.getAllStackTraces().entrySet()) {
                    dump.append("Thread ").append(e.getKey().getName()).append('\n');
                    for (StackTraceElement frame : e.getValue()) dump.append("    at ").append(frame).append('\n');
                }
                System.err.print(dump);
                System.err.flush();
            });
        } catch (Throwable ignored) {
            // not available on this JVM: no stack dumps, nothing else changes
        }
    }

    // ------------------------------------------------------------------ JSON helpers

    static String b64(byte[] bytes) {
        return bytes == null ? null : Base64.getEncoder().encodeToString(bytes);
    }

    static byte[] bytes(JsonElement e) {
        return e == null || e.isJsonNull() ? null : Base64.getDecoder().decode(e.getAsString());
    }

    static boolean present(JsonObject o, String key) {
        return o.has(key) && !o.get(key).isJsonNull();
    }

    static List<String> strings(JsonElement e) {
        List<String> out = new ArrayList<>();
        for (JsonElement x : e.getAsJsonArray()) out.add(x.getAsString());
        return out;
    }

    static JsonArray partitions(Collection<TopicPartition> tps) {
        JsonArray out = new JsonArray();
        for (TopicPartition tp : tps) {
            JsonArray pair = new JsonArray();
            pair.add(tp.topic());
            pair.add(tp.partition());
            out.add(pair);
        }
        return out;
    }

    static JsonObject record(ConsumerRecord<byte[], byte[]> r) {
        JsonObject o = new JsonObject();
        o.addProperty("topic", r.topic());
        o.addProperty("partition", r.partition());
        o.addProperty("offset", r.offset());
        o.addProperty("key", b64(r.key()));
        o.addProperty("value", b64(r.value()));
        JsonArray headers = new JsonArray();
        for (Header h : r.headers()) {
            JsonArray pair = new JsonArray();
            pair.add(h.key());
            pair.add(b64(h.value()));
            headers.add(pair);
        }
        o.add("headers", headers);
        o.addProperty("timestamp", r.timestamp());
        o.addProperty("timestamp_type", r.timestampType().name);
        return o;
    }

    static Throwable unwrap(Throwable t) {
        while ((t instanceof ExecutionException || t instanceof CompletionException) && t.getCause() != null) {
            t = t.getCause();
        }
        return t;
    }

    /** {"error", "code" (Kafka's, when the exception names one), "kind"} for a failure. */
    static JsonObject failure(Throwable t) {
        Throwable cause = unwrap(t);
        JsonObject o = new JsonObject();
        o.addProperty("error", cause.getClass().getSimpleName() + ": " + cause.getMessage());
        // A transactional producer in an error state throws KafkaException("Cannot execute
        // transactional method because we are in an error state") caused by the broker's error.
        Throwable api = cause;
        while (api instanceof KafkaException && !(api instanceof org.apache.kafka.common.errors.ApiException)
               && api.getCause() != null && api.getCause() != api) {
            api = api.getCause();
        }
        if (api != cause && api instanceof org.apache.kafka.common.errors.ApiException) {
            o.addProperty("error", o.get("error").getAsString() + " (caused by "
                          + api.getClass().getSimpleName() + ": " + api.getMessage() + ")");
            cause = api;
        }
        Errors code = Errors.forException(cause);
        if (code != Errors.UNKNOWN_SERVER_ERROR || cause instanceof UnknownServerException) {
            o.addProperty("code", code.code());
        } else if (cause.getMessage() != null && cause.getMessage().startsWith("Unexpected error in ")) {
            // The transaction manager reports a broker error it has no exception for (e.g.
            // INVALID_TRANSACTION_TIMEOUT at init) as KafkaException("Unexpected error in
            // InitProducerIdResponse; " + error.message()): the message names the error.
            for (Errors e : Errors.values()) {
                if (e.message() != null && cause.getMessage().endsWith("; " + e.message())) {
                    o.addProperty("code", e.code());
                    break;
                }
            }
        }
        if (cause instanceof OffsetOutOfRangeException || cause instanceof NoOffsetForPartitionException) {
            o.addProperty("kind", "offset_out_of_range");
        }
        if (!(cause instanceof org.apache.kafka.common.errors.ApiException)) {
            // Not the broker's answer: where the client (or this adapter) gave up.
            StringBuilder where = new StringBuilder();
            StackTraceElement[] frames = cause.getStackTrace();
            for (int i = 0; i < Math.min(6, frames.length); i++) where.append("\n    at ").append(frames[i]);
            o.addProperty("error", o.get("error").getAsString() + where);
        }
        return o;
    }

    static Properties consumerProps(String bootstrap, String group, String reset, int fetchWaitMs) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.putAll(EXTRA);
        p.put("client.id", "compat-java");
        if (group != null) p.put("group.id", group);
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", reset);
        p.put("fetch.max.wait.ms", Integer.toString(fetchWaitMs));
        p.put("session.timeout.ms", Integer.toString(SESSION_TIMEOUT_MS));
        p.put("heartbeat.interval.ms", Integer.toString(HEARTBEAT_MS));
        p.put("max.partition.fetch.bytes", Integer.toString(LARGE_LIMIT));
        p.put("fetch.max.bytes", Integer.toString(LARGE_LIMIT * 2));
        p.put("check.crcs", "true");
        p.put("request.timeout.ms", "15000");
        return p;
    }

    static KafkaConsumer<byte[], byte[]> consumer(Properties p) {
        return new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    // ------------------------------------------------------------------ serve

    static final class Server {
        final String bootstrap;
        final ExecutorService pool = Executors.newCachedThreadPool(runnable -> {
            Thread t = new Thread(runnable, "compat-request");
            t.setDaemon(true);
            return t;
        });
        final Map<Integer, Member> members = new ConcurrentHashMap<>();
        final Map<Integer, KafkaProducer<byte[], byte[]>> txnProducers = new ConcurrentHashMap<>();
        final AtomicInteger nextMember = new AtomicInteger(1);
        final AtomicInteger nextProducer = new AtomicInteger(1);
        private Admin admin;

        Server(String bootstrap) {
            this.bootstrap = bootstrap;
        }

        synchronized Admin admin() {
            if (admin == null) {
                Properties p = new Properties();
                p.put("bootstrap.servers", bootstrap);
                p.putAll(EXTRA);
                p.put("client.id", "compat-java-admin");
                p.put("request.timeout.ms", "15000");
                p.put("default.api.timeout.ms", "30000");
                admin = Admin.create(p);
            }
            return admin;
        }

        void run() throws Exception {
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            String line;
            while ((line = in.readLine()) != null) {
                if (line.isBlank()) continue;
                JsonObject request = JsonParser.parseString(line).getAsJsonObject();
                if (request.get("op").getAsString().equals("exit")) {
                    shutdown();
                    JsonObject done = new JsonObject();
                    done.addProperty("id", request.get("id").getAsLong());
                    emit(done.toString());
                    System.exit(0);
                }
                pool.submit(() -> handle(request));
            }
            Runtime.getRuntime().halt(3);
        }

        void shutdown() {
            List<Thread> leaving = new ArrayList<>();
            for (Member m : members.values()) {
                Thread t = new Thread(m::leave);
                t.start();
                leaving.add(t);
            }
            for (Thread t : leaving) {
                try {
                    t.join(30_000);
                } catch (InterruptedException ignored) {
                    return;
                }
            }
            for (KafkaProducer<byte[], byte[]> producer : txnProducers.values()) {
                producer.close(Duration.ofSeconds(5));
            }
            synchronized (this) {
                if (admin != null) admin.close(CLOSE_TIMEOUT);
            }
        }

        void handle(JsonObject request) {
            long id = request.get("id").getAsLong();
            JsonObject answer;
            try {
                answer = dispatch(request.get("op").getAsString(), request);
            } catch (Throwable t) {
                answer = failure(t);
            }
            answer.addProperty("id", id);
            emit(answer.toString());
        }

        JsonObject dispatch(String op, JsonObject r) throws Exception {
            switch (op) {
                case "metadata": return metadata(r);
                case "create_topic": return createTopic(r);
                case "delete_topic":
                    admin().deleteTopics(List.of(r.get("name").getAsString())).all()
                        .get(ADMIN_TIMEOUT_S, TimeUnit.SECONDS);
                    return new JsonObject();
                case "create_partitions":
                    admin().createPartitions(Map.of(r.get("name").getAsString(),
                            NewPartitions.increaseTo(r.get("total").getAsInt())))
                        .all().get(ADMIN_TIMEOUT_S, TimeUnit.SECONDS);
                    return new JsonObject();
                case "describe_configs": return describeConfigs(r);
                case "alter_configs": return alterConfigs(r);
                case "alter_client_quotas": return alterClientQuotas(r);
                case "describe_client_quotas": return describeClientQuotas(r);
                case "alter_user_scram_credentials": return alterUserScramCredentials(r);
                case "describe_user_scram_credentials": return describeUserScramCredentials(r);
                case "describe_topic": return describeTopic(r);
                case "describe_topics": return describeTopics(r);
                case "create_acl": return createAcl(r);
                case "describe_acls": return describeAcls();
                case "produce": return produce(r);
                case "consume": return consume(r);
                case "commit": return commit(r);
                case "committed": return committed(r);
                case "list_offsets": return listOffsets(r);
                case "txn_open": return txnOpen(r);
                case "txn_begin":
                    txnProducer(r).beginTransaction();
                    return new JsonObject();
                case "txn_produce": return send(txnProducer(r), r);
                case "txn_send_offsets": return txnSendOffsets(r);
                case "txn_commit":
                    txnProducer(r).commitTransaction();
                    return new JsonObject();
                case "txn_abort":
                    txnProducer(r).abortTransaction();
                    return new JsonObject();
                case "txn_close": {
                    KafkaProducer<byte[], byte[]> producer = txnProducers.remove(r.get("producer").getAsInt());
                    if (producer != null) producer.close(Duration.ofSeconds(5));
                    return new JsonObject();
                }
                case "member_start": return memberStart(r);
                case "member_leave": {
                    Member m = members.remove(r.get("member").getAsInt());
                    if (m != null) m.leave();
                    return new JsonObject();
                }
                case "list_groups": return listGroups();
                case "describe_group": return describeGroup(r);
                case "delete_group":
                    admin().deleteConsumerGroups(List.of(r.get("group").getAsString())).all()
                        .get(ADMIN_TIMEOUT_S, TimeUnit.SECONDS);
                    return new JsonObject();
                default:
                    throw new IllegalArgumentException("unknown op " + op);
            }
        }

        // -- cluster and admin

        JsonObject metadata(JsonObject r) throws Exception {
            List<String> topics = present(r, "topics") ? strings(r.get("topics")) : null;
            if (topics != null && r.get("auto_create").getAsBoolean()) {
                // Admin never asks for auto-creation; a producer's metadata request does.
                Properties p = new Properties();
                p.put("bootstrap.servers", bootstrap);
                p.putAll(EXTRA);
                p.put("client.id", "compat-java");
                p.put("max.block.ms", "5000");
                try (KafkaProducer<byte[], byte[]> producer =
                         new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
                    for (String topic : topics) {
                        try {
                            producer.partitionsFor(topic);
                        } catch (Exception ignored) {
                            // reported below as the topic's error
                        }
                    }
                }
            }
            JsonObject brokers = new JsonObject();
            for (Node n : admin().describeCluster().nodes().get(ADMIN_TIMEOUT_S, TimeUnit.SECONDS)) {
                JsonArray address = new JsonArray();
                address.add(n.host());
                address.add(n.port());
                brokers.add(Integer.toString(n.id()), address);
            }
            if (topics == null) {
                topics = new ArrayList<>(admin().listTopics().names().get(ADMIN_TIMEOUT_S, TimeUnit.SECONDS));
            }
            JsonObject described = new JsonObject();
            if (!topics.isEmpty()) {
                Map<String, org.apache.kafka.common.KafkaFuture<TopicDescription>> futures =
                    admin().describeTopics(topics).topicNameValues();
                for (String topic : topics) {
                    JsonObject t = new JsonObject();
                    try {
                        TopicDescription d = futures.get(topic).get(ADMIN_TIMEOUT_S, TimeUnit.SECONDS);
                        t.addProperty("error", 0);
                        t.add("partitions", leaders(d.partitions()));
                    } catch (ExecutionException e) {
                        t.addProperty("error", Errors.forException(unwrap(e)).code());
                        t.add("partitions", new JsonObject());
                    }
                    described.add(topic, t);
                }
            }
            JsonObject o = new JsonObject();
            o.add("brokers", brokers);
            o.add("topics", described);
            return o;
        }

        static JsonObject leaders(List<TopicPartitionInfo> partitions) {
            JsonObject out = new JsonObject();
            for (TopicPartitionInfo p : partitions) {
                out.addProperty(Integer.toString(p.partition()), p.leader() == null ? -1 : p.leader().id());
            }
            return out;
        }

        JsonObject createTopic(JsonObject r) throws Exception {
            NewTopic topic = new NewTopic(r.get("name").getAsString(), r.get("partitions").getAsInt(), (short) 1);
            Map<String, String> configs = new HashMap<>();
            for (Map.Entry<String, JsonElement> e : r.getAsJsonObject("configs").entrySet()) {
                configs.put(e.getKey(), e.getValue().getAsString());
            }
            topic.configs(configs);
            admin().createTopics(List.of(topic)).all().get(ADMIN_TIMEOUT_S, TimeUnit.SECONDS);
            return new JsonObject();
        }

        JsonObject describeConfigs(JsonObject r) throws Exception {
            ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, r.get("name").getAsString());
            Config config = admin().describeConfigs(List.of(resource)).all()
                .get(ADMIN_TIMEOUT_S, TimeUnit.SECONDS).get(resource);
            JsonObject configs = new JsonObject();
            for (ConfigEntry e : config.entries()) configs.addProperty(e.name(), e.value());
            JsonObject o = new JsonObject();
            o.add("configs", configs);
            return o;
        }

        JsonObject alterConfigs(JsonObject r) throws Exception {
            ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, r.get("name").getAsString());
            List<AlterConfigOp> ops = new ArrayList<>();
            for (Map.Entry<String, JsonElement> e : r.getAsJsonObject("configs").entrySet()) {
                ops.add(new AlterConfigOp(new ConfigEntry(e.getKey(), e.getValue().getAsString()),
                                          AlterConfigOp.OpType.SET));
            }
            admin().incrementalAlterConfigs(Map.of(resource, ops)).all().get(ADMIN_TIMEOUT_S, TimeUnit.SECONDS);
            return new JsonObject();
        }

        /** KIP-546: {"entity": {"user": "alice", "client-id": null}, "ops": {"producer_byte_rate": 1024 or null}}. */
        JsonObject alterClientQuotas(JsonObject r) throws Exception {
            Map<String, String> names = new HashMap<>();
            for (Map.Entry<String, JsonElement> e : r.getAsJsonObject("entity").entrySet()) {
                names.put(e.getKey(), e.getValue().isJsonNull() ? null : e.getValue().getAsString());
            }
            List<org.apache.kafka.common.quota.ClientQuotaAlteration.Op> ops = new ArrayList<>();
            for (Map.Entry<String, JsonElement> e : r.getAsJsonObject("ops").entrySet()) {
                ops.add(new org.apache.kafka.common.quota.ClientQuotaAlteration.Op(
                    e.getKey(), e.getValue().isJsonNull() ? null : e.getValue().getAsDouble()));
            }
            org.apache.kafka.common.quota.ClientQuotaAlteration alteration =
                new org.apache.kafka.common.quota.ClientQuotaAlteration(
                    new org.apache.kafka.common.quota.ClientQuotaEntity(names), ops);
            admin().alterClientQuotas(List.of(alteration)).all().get(ADMIN_TIMEOUT_S, TimeUnit.SECONDS);
            return new JsonObject();
        }

        /** KIP-554 (what kafka-configs.sh --add-config 'SCRAM-SHA-256=[...]' calls):
         *  {"user": "bob", "mechanism": "SCRAM-SHA-256", "iterations": 8192, "password": "..."}. */
        JsonObject alterUserScramCredentials(JsonObject r) throws Exception {
            org.apache.kafka.clients.admin.ScramMechanism mechanism =
                org.apache.kafka.clients.admin.ScramMechanism.fromMechanismName(r.get("mechanism").getAsString());
            org.apache.kafka.clients.admin.UserScramCredentialUpsertion upsertion =
                new org.apache.kafka.clients.admin.UserScramCredentialUpsertion(r.get("user").getAsString(),
                    new org.apache.kafka.clients.admin.ScramCredentialInfo(mechanism, r.get("iterations").getAsInt()),
                    r.get("password").getAsString());
            admin().alterUserScramCredentials(List.of(upsertion)).all().get(ADMIN_TIMEOUT_S, TimeUnit.SECONDS);
            return new JsonObject();
        }

        /** {"users": ["bob"]}: {"credentials": {"bob": [["SCRAM-SHA-256", 8192], ...]}}. */
        JsonObject describeUserScramCredentials(JsonObject r) throws Exception {
            Map<String, org.apache.kafka.clients.admin.UserScramCredentialsDescription> found =
                admin().describeUserScramCredentials(strings(r.get("users"))).all().get(ADMIN_TIMEOUT_S, TimeUnit.SECONDS);
            JsonObject o = new JsonObject();
            for (Map.Entry<String, org.apache.kafka.clients.admin.UserScramCredentialsDescription> e : found.entrySet()) {
                JsonArray infos = new JsonArray();
                for (org.apache.kafka.clients.admin.ScramCredentialInfo info : e.getValue().credentialInfos()) {
                    JsonArray pair = new JsonArray();
                    pair.add(info.mechanism().mechanismName());
                    pair.add(info.iterations());
                    infos.add(pair);
                }
                o.add(e.getKey(), infos);
            }
            JsonObject answer = new JsonObject();
            answer.add("credentials", o);
            return answer;
        }

        /** {"user": "alice"} (exact), {"user": null} (default) filter components; "strict". */
        JsonObject describeClientQuotas(JsonObject r) throws Exception {
            List<org.apache.kafka.common.quota.ClientQuotaFilterComponent> components = new ArrayList<>();
            for (Map.Entry<String, JsonElement> e : r.getAsJsonObject("filter").entrySet()) {
                components.add(e.getValue().isJsonNull()
                    ? org.apache.kafka.common.quota.ClientQuotaFilterComponent.ofDefaultEntity(e.getKey())
                    : org.apache.kafka.common.quota.ClientQuotaFilterComponent.ofEntity(e.getKey(),
                                                                                       e.getValue().getAsString()));
            }
            org.apache.kafka.common.quota.ClientQuotaFilter filter = r.get("strict").getAsBoolean()
                ? org.apache.kafka.common.quota.ClientQuotaFilter.containsOnly(components)
                : org.apache.kafka.common.quota.ClientQuotaFilter.contains(components);
            Map<org.apache.kafka.common.quota.ClientQuotaEntity, Map<String, Double>> found =
                admin().describeClientQuotas(filter).entities().get(ADMIN_TIMEOUT_S, TimeUnit.SECONDS);
            JsonArray entries = new JsonArray();
            for (Map.Entry<org.apache.kafka.common.quota.ClientQuotaEntity, Map<String, Double>> e : found.entrySet()) {
                JsonObject entity = new JsonObject();
                for (Map.Entry<String, String> n : e.getKey().entries().entrySet()) entity.addProperty(n.getKey(), n.getValue());
                JsonObject values = new JsonObject();
                for (Map.Entry<String, Double> v : e.getValue().entrySet()) values.addProperty(v.getKey(), v.getValue());
                JsonObject entry = new JsonObject();
                entry.add("entity", entity);
                entry.add("values", values);
                entries.add(entry);
            }
            JsonObject o = new JsonObject();
            o.add("entries", entries);
            return o;
        }

        /** By name, or by topic id (KIP-516: Admin.describeTopics(TopicCollection.ofTopicIds)). */
        // ACLs on topics (create_acl: one binding; describe_acls: every binding, as Kafka's
        // AclBinding strings' parts)
        JsonObject createAcl(JsonObject r) throws Exception {
            AclBinding binding = new AclBinding(
                new ResourcePattern(ResourceType.TOPIC, r.get("name").getAsString(),
                                    PatternType.valueOf(r.get("pattern").getAsString())),
                new AccessControlEntry(r.get("principal").getAsString(), "*",
                                       AclOperation.valueOf(r.get("operation").getAsString()),
                                       AclPermissionType.valueOf(r.get("permission").getAsString())));
            admin().createAcls(List.of(binding)).all().get(ADMIN_TIMEOUT_S, TimeUnit.SECONDS);
            return new JsonObject();
        }

        JsonObject describeAcls() throws Exception {
            JsonArray acls = new JsonArray();
            for (AclBinding b : admin().describeAcls(AclBindingFilter.ANY).values()
                    .get(ADMIN_TIMEOUT_S, TimeUnit.SECONDS)) {
                JsonObject a = new JsonObject();
                a.addProperty("resource_type", b.pattern().resourceType().name());
                a.addProperty("name", b.pattern().name());
                a.addProperty("pattern", b.pattern().patternType().name());
                a.addProperty("principal", b.entry().principal());
                a.addProperty("host", b.entry().host());
                a.addProperty("operation", b.entry().operation().name());
                a.addProperty("permission", b.entry().permissionType().name());
                acls.add(a);
            }
            JsonObject o = new JsonObject();
            o.add("acls", acls);
            return o;
        }

        JsonObject describeTopic(JsonObject r) throws Exception {
            TopicDescription d;
            if (present(r, "topic_id")) {
                Uuid id = Uuid.fromString(r.get("topic_id").getAsString());
                d = admin().describeTopics(TopicCollection.ofTopicIds(List.of(id))).topicIdValues().get(id)
                    .get(ADMIN_TIMEOUT_S, TimeUnit.SECONDS);
            } else {
                String name = r.get("name").getAsString();
                d = admin().describeTopics(TopicCollection.ofTopicNames(List.of(name))).topicNameValues().get(name)
                    .get(ADMIN_TIMEOUT_S, TimeUnit.SECONDS);
            }
            JsonObject o = new JsonObject();
            o.addProperty("name", d.name());
            o.addProperty("topic_id", d.topicId().toString());
            o.add("partitions", leaders(d.partitions()));
            return o;
        }

        /** Admin.describeTopics(names, options) in full: what a 3.7+ client gets through
         * DescribeTopicPartitions (API 75) when the broker advertises it, paged by
         * partition_limit (DescribeTopicsOptions.partitionSizeLimitPerResponse). Per topic:
         * error (0 or Kafka's code), id, internal, authorized operations (when asked) and each
         * partition's leader, replicas and ISR. */
        JsonObject describeTopics(JsonObject r) throws Exception {
            List<String> names = strings(r.get("names"));
            DescribeTopicsOptions options = new DescribeTopicsOptions();
            if (present(r, "partition_limit")) {
                options.partitionSizeLimitPerResponse(r.get("partition_limit").getAsInt());
            }
            if (present(r, "authorized_operations")) {
                options.includeAuthorizedOperations(r.get("authorized_operations").getAsBoolean());
            }
            Map<String, org.apache.kafka.common.KafkaFuture<TopicDescription>> futures =
                admin().describeTopics(TopicCollection.ofTopicNames(names), options).topicNameValues();
            JsonObject topics = new JsonObject();
            for (String name : names) {
                JsonObject t = new JsonObject();
                try {
                    TopicDescription d = futures.get(name).get(ADMIN_TIMEOUT_S, TimeUnit.SECONDS);
                    t.addProperty("error", 0);
                    t.addProperty("topic_id", d.topicId().toString());
                    t.addProperty("internal", d.isInternal());
                    if (d.authorizedOperations() != null) {
                        JsonArray ops = new JsonArray();
                        new TreeSet<>(d.authorizedOperations().stream().map(Enum::name).toList()).forEach(ops::add);
                        t.add("authorized_operations", ops);
                    }
                    JsonArray partitions = new JsonArray();
                    for (TopicPartitionInfo p : d.partitions()) {
                        JsonObject pj = new JsonObject();
                        pj.addProperty("partition", p.partition());
                        pj.addProperty("leader", p.leader() == null ? -1 : p.leader().id());
                        JsonArray replicas = new JsonArray();
                        p.replicas().forEach(n -> replicas.add(n.id()));
                        JsonArray isr = new JsonArray();
                        p.isr().forEach(n -> isr.add(n.id()));
                        pj.add("replicas", replicas);
                        pj.add("isr", isr);
                        partitions.add(pj);
                    }
                    t.add("partitions", partitions);
                } catch (ExecutionException e) {
                    t.addProperty("error", Errors.forException(unwrap(e)).code());
                    t.addProperty("exception", unwrap(e).getClass().getSimpleName());
                }
                topics.add(name, t);
            }
            JsonObject o = new JsonObject();
            o.add("topics", topics);
            return o;
        }

        // -- data

        JsonObject produce(JsonObject r) throws Exception {
            String acks = r.get("acks").getAsString();
            Properties p = new Properties();
            p.put("bootstrap.servers", bootstrap);
            p.putAll(EXTRA);
            p.put("client.id", "compat-java");
            p.put("acks", acks);
            p.put("compression.type", r.get("compression").getAsString());
            p.put("linger.ms", "5");
            p.put("max.request.size", Integer.toString(LARGE_LIMIT));
            p.put("max.block.ms", "15000");
            // A batch the broker never takes fails here inside the test's time (the default
            // delivery timeout, 120 s, outlasts it) and says why instead of hanging flush().
            p.put("request.timeout.ms", "15000");
            p.put("delivery.timeout.ms", "30000");
            if (present(r, "idempotent")) {
                p.put("enable.idempotence", Boolean.toString(r.get("idempotent").getAsBoolean()));
            } else if (!acks.equals("all")) {
                p.put("enable.idempotence", "false");
            }
            try (KafkaProducer<byte[], byte[]> producer =
                     new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
                return send(producer, r);
            }
        }

        /** Send r's messages to r's topic, flush, and report each record's partition and offset. */
        static JsonObject send(KafkaProducer<byte[], byte[]> producer, JsonObject r) throws Exception {
            String topic = r.get("topic").getAsString();
            List<Future<RecordMetadata>> futures = new ArrayList<>();
            for (JsonElement e : r.getAsJsonArray("messages")) {
                JsonObject m = e.getAsJsonObject();
                List<Header> headers = new ArrayList<>();
                for (JsonElement h : m.getAsJsonArray("headers")) {
                    JsonArray pair = h.getAsJsonArray();
                    headers.add(new RecordHeader(pair.get(0).getAsString(), bytes(pair.get(1))));
                }
                Integer partition = present(m, "partition") ? m.get("partition").getAsInt() : null;
                Long timestamp = present(m, "timestamp") ? m.get("timestamp").getAsLong() : null;
                futures.add(producer.send(new ProducerRecord<>(
                    topic, partition, timestamp, bytes(m.get("key")), bytes(m.get("value")), headers)));
            }
            producer.flush();
            JsonArray deliveries = new JsonArray();
            for (Future<RecordMetadata> f : futures) {
                RecordMetadata md = f.get(30, TimeUnit.SECONDS);
                JsonArray d = new JsonArray();
                d.add(md.partition());
                d.add(md.hasOffset() ? md.offset() : null);
                deliveries.add(d);
            }
            JsonObject o = new JsonObject();
            o.add("deliveries", deliveries);
            return o;
        }

        // -- transactions

        /** A KafkaProducer with transactional.id, initTransactions() done; answers its handle. */
        JsonObject txnOpen(JsonObject r) {
            Properties p = new Properties();
            p.put("bootstrap.servers", bootstrap);
            p.putAll(EXTRA);
            p.put("client.id", "compat-java-txn");
            p.put("transactional.id", r.get("transactional_id").getAsString());
            p.put("linger.ms", "5");
            p.put("max.block.ms", Integer.toString(r.get("block_ms").getAsInt()));
            if (present(r, "transaction_timeout_ms")) {
                p.put("transaction.timeout.ms", Integer.toString(r.get("transaction_timeout_ms").getAsInt()));
            }
            KafkaProducer<byte[], byte[]> producer =
                new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer());
            try {
                producer.initTransactions();
            } catch (RuntimeException e) {
                producer.close(Duration.ofSeconds(5));
                throw e;
            }
            int id = nextProducer.getAndIncrement();
            txnProducers.put(id, producer);
            JsonObject o = new JsonObject();
            o.addProperty("producer", id);
            return o;
        }

        KafkaProducer<byte[], byte[]> txnProducer(JsonObject r) {
            KafkaProducer<byte[], byte[]> producer = txnProducers.get(r.get("producer").getAsInt());
            if (producer == null) throw new IllegalStateException("no transactional producer " + r.get("producer"));
            return producer;
        }

        /** sendOffsetsToTransaction with the group's metadata as an application that assigns
         *  its partitions itself has it: the group id alone (generation -1, no member id). */
        JsonObject txnSendOffsets(JsonObject r) {
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            for (JsonElement e : r.getAsJsonArray("offsets")) {
                JsonArray entry = e.getAsJsonArray();
                offsets.put(new TopicPartition(entry.get(0).getAsString(), entry.get(1).getAsInt()),
                            new OffsetAndMetadata(entry.get(2).getAsLong()));
            }
            txnProducer(r).sendOffsetsToTransaction(offsets,
                new org.apache.kafka.clients.consumer.ConsumerGroupMetadata(r.get("group").getAsString()));
            return new JsonObject();
        }

        JsonObject consume(JsonObject r) throws Exception {
            String topic = r.get("topic").getAsString();
            int n = r.get("n").getAsInt();
            String group = present(r, "group") ? r.get("group").getAsString() : null;
            String reset = r.get("reset").getAsString();
            long deadline = System.nanoTime() + r.get("timeout_ms").getAsLong() * 1_000_000L;
            Properties p = consumerProps(bootstrap, group, reset, r.get("fetch_wait_ms").getAsInt());
            p.put("max.poll.records", Integer.toString(Math.max(1, Math.min(n, 500))));
            p.put("isolation.level", r.get("isolation_level").getAsString());
            if (present(r, "client_rack")) p.put("client.rack", r.get("client_rack").getAsString());
            List<ConsumerRecord<byte[], byte[]>> got = new ArrayList<>();
            Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
            try (KafkaConsumer<byte[], byte[]> c = consumer(p)) {
                if (group != null) {
                    c.subscribe(List.of(topic));
                } else if (present(r, "start")) {
                    Map<TopicPartition, Long> start = new LinkedHashMap<>();
                    for (Map.Entry<String, JsonElement> e : r.getAsJsonObject("start").entrySet()) {
                        start.put(new TopicPartition(topic, Integer.parseInt(e.getKey())), e.getValue().getAsLong());
                    }
                    c.assign(start.keySet());
                    start.forEach(c::seek);
                } else {
                    List<PartitionInfo> infos = List.of();
                    while (infos.isEmpty() && System.nanoTime() < deadline) {
                        infos = c.partitionsFor(topic);
                        if (infos == null) infos = List.of();
                        if (infos.isEmpty()) Thread.sleep(100);
                    }
                    List<TopicPartition> tps = new ArrayList<>();
                    for (PartitionInfo info : infos) tps.add(new TopicPartition(topic, info.partition()));
                    c.assign(tps);
                    if (reset.equals("latest")) c.seekToEnd(tps);
                    else c.seekToBeginning(tps);
                }
                while (got.size() < n && System.nanoTime() < deadline) {
                    for (ConsumerRecord<byte[], byte[]> rec : c.poll(Duration.ofMillis(200))) {
                        if (got.size() >= n) break;
                        got.add(rec);
                        next.put(new TopicPartition(rec.topic(), rec.partition()), new OffsetAndMetadata(rec.offset() + 1));
                    }
                }
                // Only what was handed back counts as consumed.
                if (group != null && r.get("commit").getAsBoolean() && !got.isEmpty()) c.commitSync(next);
            }
            JsonArray records = new JsonArray();
            for (ConsumerRecord<byte[], byte[]> rec : got) records.add(record(rec));
            JsonObject o = new JsonObject();
            o.add("records", records);
            return o;
        }

        JsonObject commit(JsonObject r) throws Exception {
            String topic = r.get("topic").getAsString();
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            for (Map.Entry<String, JsonElement> e : r.getAsJsonObject("offsets").entrySet()) {
                offsets.put(new TopicPartition(topic, Integer.parseInt(e.getKey())),
                            new OffsetAndMetadata(e.getValue().getAsLong()));
            }
            try (KafkaConsumer<byte[], byte[]> c =
                     consumer(consumerProps(bootstrap, r.get("group").getAsString(), "earliest", 100))) {
                c.commitSync(offsets);
            }
            return new JsonObject();
        }

        JsonObject committed(JsonObject r) throws Exception {
            String group = r.get("group").getAsString();
            String topic = r.get("topic").getAsString();
            List<TopicPartition> tps = new ArrayList<>();
            for (JsonElement e : r.getAsJsonArray("partitions")) tps.add(new TopicPartition(topic, e.getAsInt()));
            Map<TopicPartition, OffsetAndMetadata> got = admin()
                .listConsumerGroupOffsets(Map.of(group, new ListConsumerGroupOffsetsSpec().topicPartitions(tps)))
                .partitionsToOffsetAndMetadata(group).get(ADMIN_TIMEOUT_S, TimeUnit.SECONDS);
            JsonObject offsets = new JsonObject();
            for (TopicPartition tp : tps) {
                OffsetAndMetadata om = got.get(tp);
                offsets.addProperty(Integer.toString(tp.partition()),
                                    om == null || om.offset() < 0 ? null : om.offset());
            }
            JsonObject o = new JsonObject();
            o.add("offsets", offsets);
            return o;
        }

        JsonObject listOffsets(JsonObject r) throws Exception {
            TopicPartition tp = new TopicPartition(r.get("topic").getAsString(), r.get("partition").getAsInt());
            JsonElement spec = r.get("spec");
            OffsetSpec offsetSpec;
            if (spec.getAsJsonPrimitive().isString()) {
                offsetSpec = spec.getAsString().equals("earliest") ? OffsetSpec.earliest() : OffsetSpec.latest();
            } else {
                offsetSpec = OffsetSpec.forTimestamp(spec.getAsLong());
            }
            IsolationLevel level = r.get("isolation_level").getAsString().equals("read_committed")
                ? IsolationLevel.READ_COMMITTED : IsolationLevel.READ_UNCOMMITTED;
            long offset = admin().listOffsets(Map.of(tp, offsetSpec), new ListOffsetsOptions(level)).partitionResult(tp)
                .get(ADMIN_TIMEOUT_S, TimeUnit.SECONDS).offset();
            JsonObject o = new JsonObject();
            o.addProperty("offset", offset >= 0 ? offset : null);
            return o;
        }

        // -- groups

        JsonObject memberStart(JsonObject r) {
            int id = nextMember.getAndIncrement();
            Properties p = consumerProps(bootstrap, r.get("group").getAsString(), "earliest", 100);
            Member m = new Member(id, consumer(p), strings(r.get("topics")));
            members.put(id, m);
            m.thread.start();
            JsonObject o = new JsonObject();
            o.addProperty("member", id);
            return o;
        }

        JsonObject listGroups() throws Exception {
            JsonArray groups = new JsonArray();
            for (ConsumerGroupListing g : admin().listConsumerGroups().all().get(ADMIN_TIMEOUT_S, TimeUnit.SECONDS)) {
                groups.add(g.groupId());
            }
            JsonObject o = new JsonObject();
            o.add("groups", groups);
            return o;
        }

        JsonObject describeGroup(JsonObject r) throws Exception {
            String group = r.get("group").getAsString();
            ConsumerGroupDescription g = admin().describeConsumerGroups(List.of(group)).describedGroups().get(group)
                .get(ADMIN_TIMEOUT_S, TimeUnit.SECONDS);
            JsonArray members = new JsonArray();
            for (MemberDescription m : g.members()) {
                JsonObject member = new JsonObject();
                member.addProperty("member_id", m.consumerId());
                member.addProperty("client_id", m.clientId());
                member.add("assignment", partitions(m.assignment().topicPartitions()));
                members.add(member);
            }
            JsonObject o = new JsonObject();
            o.addProperty("group_id", g.groupId());
            o.addProperty("state", g.state().toString());
            // The admin API exposes only whether the protocol type is empty (a "simple" group).
            o.addProperty("protocol_type", g.isSimpleConsumerGroup() ? "" : "consumer");
            o.add("members", members);
            return o;
        }
    }

    /** A subscribed consumer polled by its own thread, pushing assignment and records. */
    static final class Member {
        final int id;
        final KafkaConsumer<byte[], byte[]> consumer;
        final List<String> topics;
        final Thread thread;
        private volatile boolean stop;

        Member(int id, KafkaConsumer<byte[], byte[]> consumer, List<String> topics) {
            this.id = id;
            this.consumer = consumer;
            this.topics = topics;
            this.thread = new Thread(this::run, "compat-member-" + id);
            this.thread.setDaemon(true);
        }

        void run() {
            Set<TopicPartition> last = null;
            try {
                consumer.subscribe(topics);
                while (!stop) {
                    JsonObject event = new JsonObject();
                    try {
                        ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(100));
                        if (!records.isEmpty()) {
                            JsonArray batch = new JsonArray();
                            for (ConsumerRecord<byte[], byte[]> rec : records) batch.add(record(rec));
                            event.add("records", batch);
                        }
                    } catch (WakeupException e) {
                        continue;
                    } catch (Exception e) {
                        event.addProperty("error", e.getClass().getSimpleName() + ": " + e.getMessage());
                    }
                    Set<TopicPartition> now = new HashSet<>(consumer.assignment());
                    if (!now.equals(last)) {
                        event.add("assignment", partitions(now));
                        last = now;
                    }
                    if (event.size() > 0) {
                        event.addProperty("ev", "member");
                        event.addProperty("member", id);
                        emit(event.toString());
                    }
                    if (event.has("error")) Thread.sleep(100);
                }
            } catch (Throwable t) {
                JsonObject event = new JsonObject();
                event.addProperty("ev", "member");
                event.addProperty("member", id);
                event.addProperty("error", "member loop ended: " + t);
                emit(event.toString());
            } finally {
                consumer.close(CLOSE_TIMEOUT);
            }
        }

        void leave() {
            stop = true;
            consumer.wakeup();
            try {
                thread.join(30_000);
            } catch (InterruptedException ignored) {
                Thread.currentThread().interrupt();
            }
        }
    }

    // ------------------------------------------------------------------ worker

    /** See test_groups_extended.py: commits every 300 ms and on revocation, reports everything. */
    static final class Worker {
        final KafkaConsumer<byte[], byte[]> consumer;
        final Map<TopicPartition, Long> pending = new HashMap<>();
        volatile boolean stop;

        Worker(KafkaConsumer<byte[], byte[]> consumer) {
            this.consumer = consumer;
        }

        static void main(String[] args) throws Exception {
            Map<String, String> opts = new HashMap<>();
            List<String> topics = new ArrayList<>();
            for (int i = 0; i < args.length; i++) {
                if (args[i].startsWith("--")) opts.put(args[i].substring(2), args[++i]);
                else topics.add(args[i]);
            }
            int sessionMs = Integer.parseInt(opts.getOrDefault("session-ms", Integer.toString(SESSION_TIMEOUT_MS)));
            Properties p = consumerProps(opts.get("bootstrap"), opts.get("group"), "earliest", 100);
            p.put("client.id", opts.getOrDefault("client-id", "compat-ext"));
            p.put("session.timeout.ms", Integer.toString(sessionMs));
            p.put("request.timeout.ms", Integer.toString(Math.max(30000, sessionMs + 5000)));
            if (opts.containsKey("instance")) p.put("group.instance.id", opts.get("instance"));
            if (opts.containsKey("assignor")) {
                Map<String, String> assignors = Map.of(
                    "range", "org.apache.kafka.clients.consumer.RangeAssignor",
                    "roundrobin", "org.apache.kafka.clients.consumer.RoundRobinAssignor",
                    "cooperative-sticky", "org.apache.kafka.clients.consumer.CooperativeStickyAssignor");
                p.put("partition.assignment.strategy", assignors.get(opts.get("assignor")));
            }
            if ("consumer".equals(opts.get("protocol"))) {
                // KIP-848: the broker assigns and sets the session and heartbeat timing; the
                // client refuses these classic settings with group.protocol=consumer.
                p.remove("session.timeout.ms");
                p.remove("heartbeat.interval.ms");
                p.remove("partition.assignment.strategy");
                p.put("group.protocol", "consumer");
                if (opts.containsKey("remote-assignor")) p.put("group.remote.assignor", opts.get("remote-assignor"));
            }
            Worker w = new Worker(consumer(p));
            CountDownLatch done = new CountDownLatch(1);
            Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                w.stop = true;
                w.consumer.wakeup();
                try {
                    done.await(30, TimeUnit.SECONDS);
                } catch (InterruptedException ignored) {
                    // exiting anyway
                }
            }));
            try {
                w.run(topics);
            } catch (Throwable t) {
                emit(event("fatal", "msg", t.toString()));
                throw t;
            } finally {
                emit(event("closed"));
                done.countDown();
            }
        }

        static String event(String kind, Object... kv) {
            JsonObject o = new JsonObject();
            o.addProperty("ev", kind);
            for (int i = 0; i < kv.length; i += 2) {
                Object v = kv[i + 1];
                if (v instanceof JsonElement) o.add((String) kv[i], (JsonElement) v);
                else o.addProperty((String) kv[i], String.valueOf(v));
            }
            return o.toString();
        }

        static JsonArray parts(Collection<TopicPartition> tps) {
            JsonArray out = new JsonArray();
            for (int p : new TreeSet<>(tps.stream().map(TopicPartition::partition).toList())) out.add(p);
            return out;
        }

        void run(List<String> topics) {
            consumer.subscribe(topics, new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> revoked) {
                    if (revoked.isEmpty()) return;
                    commit(revoked);
                    emit(event("revoked", "parts", parts(revoked)));
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> assigned) {
                    if (!assigned.isEmpty()) emit(event("assigned", "parts", parts(assigned)));
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> lost) {
                    if (lost.isEmpty()) return;
                    emit(event("lost", "parts", parts(lost)));
                    pending.keySet().removeAll(lost);
                }
            });
            long last = System.nanoTime();
            try {
                while (!stop) {
                    ConsumerRecords<byte[], byte[]> records;
                    try {
                        records = consumer.poll(Duration.ofMillis(100));
                    } catch (WakeupException e) {
                        continue;
                    } catch (Exception e) {
                        emit(event("error", "msg", e.toString()));
                        sleep(100);
                        continue;
                    }
                    List<String> lines = new ArrayList<>();
                    for (ConsumerRecord<byte[], byte[]> rec : records) {
                        JsonObject o = new JsonObject();
                        o.addProperty("ev", "rec");
                        o.addProperty("p", rec.partition());
                        o.addProperty("o", rec.offset());
                        lines.add(o.toString());
                        pending.put(new TopicPartition(rec.topic(), rec.partition()), rec.offset() + 1);
                    }
                    emitAll(lines);
                    if (System.nanoTime() - last >= COMMIT_EVERY_MS * 1_000_000L) {
                        commit(null);
                        last = System.nanoTime();
                    }
                }
                commit(null);
            } finally {
                consumer.close(CLOSE_TIMEOUT);
            }
        }

        /** Commit what was reported (of `only`, when given); a pending wakeup is retried once. */
        void commit(Collection<TopicPartition> only) {
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            pending.forEach((tp, o) -> {
                if (only == null || only.contains(tp)) offsets.put(tp, new OffsetAndMetadata(o));
            });
            if (offsets.isEmpty()) return;
            for (int attempt = 0; attempt < 2; attempt++) {
                try {
                    consumer.commitSync(offsets);
                    JsonObject committed = new JsonObject();
                    offsets.forEach((tp, om) -> committed.addProperty(Integer.toString(tp.partition()), om.offset()));
                    emit(event("commit", "offsets", committed));
                    pending.keySet().removeAll(offsets.keySet());
                    return;
                } catch (WakeupException e) {
                    // the shutdown hook's wakeup landed here instead of in poll(): once more
                } catch (Exception e) {
                    emit(event("error", "msg", "commit: " + e));
                    return;
                }
            }
        }

        static void sleep(long ms) {
            try {
                Thread.sleep(ms);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /**
     * A share-group member (KIP-932) in a process of its own: kafka-clients 3.9's early-access
     * KafkaShareConsumer, which speaks the v0 share APIs. It accepts every record by implicit
     * acknowledgement, sent by a commitSync after each poll (3.9 settles on implicit mode when
     * its first two polls find nothing, which acknowledge() cannot undo), printing one JSON line per
     * record ({"partition", "offset", "value"}) and one per acknowledgement failure
     * ({"error"}), so a test can tell that every record was delivered and accepted once.
     * It stops and closes (sending its last acknowledgements) when stdin closes or says "stop".
     */
    static final class ShareWorker {
        static void main(String[] args) throws Exception {
            Map<String, String> opts = new HashMap<>();
            List<String> topics = new ArrayList<>();
            for (int i = 0; i < args.length; i++) {
                if (args[i].startsWith("--")) opts.put(args[i].substring(2), args[++i]);
                else topics.add(args[i]);
            }
            Properties p = new Properties();
            p.put("bootstrap.servers", opts.get("bootstrap"));
            p.put("group.id", opts.get("group"));
            p.put("client.id", opts.getOrDefault("client-id", "compat-share"));
            p.put("enable.metrics.push", "false");
            p.put("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
            p.put("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
            final java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
            Thread stdin = new Thread(() -> {
                try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                    String line;
                    while ((line = in.readLine()) != null && !line.trim().equals("stop")) { }
                } catch (Exception e) { }
                stop.set(true);
            }, "stdin");
            stdin.setDaemon(true);
            stdin.start();
            try (org.apache.kafka.clients.consumer.KafkaShareConsumer<byte[], byte[]> consumer =
                     new org.apache.kafka.clients.consumer.KafkaShareConsumer<>(p)) {
                consumer.subscribe(topics);
                emit("{\"ready\":true}");
                while (!stop.get()) {
                    org.apache.kafka.clients.consumer.ConsumerRecords<byte[], byte[]> records =
                        consumer.poll(Duration.ofMillis(200));
                    List<String> lines = new ArrayList<>();
                    for (org.apache.kafka.clients.consumer.ConsumerRecord<byte[], byte[]> r : records) {
                        JsonObject o = new JsonObject();
                        o.addProperty("partition", r.partition());
                        o.addProperty("offset", r.offset());
                        o.addProperty("value", new String(r.value(), StandardCharsets.UTF_8));
                        lines.add(o.toString());
                    }
                    if (!records.isEmpty()) {
                        Map<TopicIdPartition, java.util.Optional<org.apache.kafka.common.KafkaException>> result =
                            consumer.commitSync(Duration.ofSeconds(30));
                        for (Map.Entry<TopicIdPartition, java.util.Optional<org.apache.kafka.common.KafkaException>> e
                                : result.entrySet()) {
                            if (e.getValue() != null && e.getValue().isPresent()) {
                                JsonObject o = new JsonObject();
                                o.addProperty("error", e.getKey() + ": " + e.getValue().get());
                                lines.add(o.toString());
                            }
                        }
                    }
                    emitAll(lines);
                }
            }
            emit("{\"closed\":true}");
        }
    }
}
