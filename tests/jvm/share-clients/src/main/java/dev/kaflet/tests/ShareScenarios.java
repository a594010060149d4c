package dev.kaflet.tests;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.ShareMemberDescription;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.internals.Exit;
import org.apache.kafka.tools.consumer.group.ShareGroupCommand;

/**
 * Share-group scenarios with the Java client 4.4, one JVM for all of them: one JSON command per
 * stdin line ({"id", "op", "bootstrap", ...}), one JSON answer per stdout line ({"id", "ok",
 * "result"} or {"id", "ok": false, "error": {"type", "message"}}). Each op is a whole scenario on
 * its own topic and group (names given by the caller), run on a thread of its own, so the same
 * scenario runs against kaflet and Kafka at once. Results hold no ids or ports: they compare as
 * they are.
 */
public final class ShareScenarios {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final PrintStream ANSWERS = System.out;
    private static final ExecutorService POOL = Executors.newCachedThreadPool();
    private static final ThreadLocal<ByteArrayOutputStream> TOOL_OUT = new ThreadLocal<>();
    private static final Duration WAIT = Duration.ofSeconds(40);

    private ShareScenarios() {}

    static final class ExitCalled extends RuntimeException {
        final int status;

        ExitCalled(int status) {
            super("exit " + status);
            this.status = status;
        }
    }

    public static void main(String[] args) throws Exception {
        System.setOut(new PrintStream(new Routed(TOOL_OUT, System.err), true, StandardCharsets.UTF_8));
        Exit.setExitProcedure((status, message) -> {
            throw new ExitCalled(status);
        });
        answer(Map.of("event", "ready"));
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) continue;
            JsonNode cmd = JSON.readTree(line);
            POOL.submit(() -> run(cmd));
        }
        POOL.shutdownNow();
        System.exit(0);
    }

    /** Writes to the current thread's buffer when it has one (a tool's output), else to `fallback`. */
    static final class Routed extends OutputStream {
        private final ThreadLocal<ByteArrayOutputStream> buffer;
        private final OutputStream fallback;

        Routed(ThreadLocal<ByteArrayOutputStream> buffer, OutputStream fallback) {
            this.buffer = buffer;
            this.fallback = fallback;
        }

        private OutputStream target() {
            ByteArrayOutputStream b = buffer.get();
            return b != null ? b : fallback;
        }

        @Override
        public void write(int b) throws java.io.IOException {
            target().write(b);
        }

        @Override
        public void write(byte[] b, int off, int len) throws java.io.IOException {
            target().write(b, off, len);
        }
    }

    private static void answer(Object value) {
        try {
            String text = JSON.writeValueAsString(value);
            synchronized (ANSWERS) {
                ANSWERS.println(text);
                ANSWERS.flush();
            }
        } catch (Exception e) {
            e.printStackTrace(System.err);
        }
    }

    private static void run(JsonNode cmd) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("id", cmd.path("id").asLong());
        try {
            out.put("result", dispatch(cmd.path("op").asText(), cmd));
            out.put("ok", true);
        } catch (Throwable t) {
            out.put("ok", false);
            out.put("error", error(t));
        }
        answer(out);
    }

    static Map<String, Object> error(Throwable t) {
        while ((t instanceof ExecutionException || t instanceof java.util.concurrent.CompletionException) && t.getCause() != null) {
            t = t.getCause();
        }
        Map<String, Object> e = new LinkedHashMap<>();
        e.put("type", t.getClass().getSimpleName());
        e.put("message", String.valueOf(t.getMessage()));
        return e;
    }

    private static Object dispatch(String op, JsonNode cmd) throws Exception {
        switch (op) {
            case "implicit":
                return implicit(cmd);
            case "explicit":
                return explicit(cmd);
            case "renew":
                return renew(cmd);
            case "record_limit":
                return recordLimit(cmd);
            case "many_consumers":
                return manyConsumers(cmd);
            case "lock_timeout":
                return lockTimeout(cmd);
            case "poison":
                return poison(cmd);
            case "read_committed":
                return readCommitted(cmd);
            case "admin":
                return adminScenario(cmd);
            case "killed_consumer":
                return killedConsumer(cmd);
            case "broker_sigkill":
                return brokerSigkill(cmd);
            default:
                throw new IllegalArgumentException("unknown op " + op);
        }
    }

    // -- helpers ---------------------------------------------------------------------------

    static Admin admin(String bootstrap) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        return Admin.create(p);
    }

    /** A topic, and the group's configs (reading from the earliest offset, plus `configs`). */
    static void setUp(JsonNode cmd, int partitions, Map<String, String> configs) throws Exception {
        try (Admin admin = admin(cmd.path("bootstrap").asText())) {
            admin.createTopics(List.of(new NewTopic(cmd.path("topic").asText(), partitions, (short) 1))).all().get();
            Map<String, String> all = new LinkedHashMap<>();
            all.put("share.auto.offset.reset", "earliest");
            all.putAll(configs);
            setGroupConfigs(admin, cmd.path("group").asText(), all);
            long deadline = System.currentTimeMillis() + 30000;
            while (true) {  // Kafka makes a topic's partitions a little after CreateTopics answers
                try {
                    var d = admin.describeTopics(List.of(cmd.path("topic").asText())).allTopicNames().get();
                    if (d.values().iterator().next().partitions().stream().allMatch(p -> p.leader() != null)) break;
                } catch (ExecutionException e) {
                    // not yet
                }
                if (System.currentTimeMillis() > deadline) throw new IllegalStateException("topic has no leaders");
                Thread.sleep(50);
            }
        }
    }

    static void setGroupConfigs(Admin admin, String group, Map<String, String> configs) throws Exception {
        List<AlterConfigOp> ops = new ArrayList<>();
        configs.forEach((k, v) -> ops.add(new AlterConfigOp(new ConfigEntry(k, v), AlterConfigOp.OpType.SET)));
        admin.incrementalAlterConfigs(Map.of(new ConfigResource(ConfigResource.Type.GROUP, group), ops)).all().get();
    }

    /** `values` in batches of `batch` records (a share partition acquires whole batches). */
    static void produce(String bootstrap, String topic, List<String> values, int batch, Map<String, String> extra) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("linger.ms", "5");
        p.putAll(extra);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
            int i = 0;
            for (String v : values) {
                producer.send(new ProducerRecord<>(topic, 0, null, v));
                if (++i % batch == 0) producer.flush();
            }
            producer.flush();
        }
    }

    static KafkaShareConsumer<String, String> consumer(JsonNode cmd, Map<String, String> extra) {
        Properties p = new Properties();
        p.put("bootstrap.servers", cmd.path("bootstrap").asText());
        p.put("group.id", cmd.path("group").asText());
        p.putAll(extra);
        KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(p, new StringDeserializer(), new StringDeserializer());
        c.subscribe(List.of(cmd.path("topic").asText()));
        return c;
    }

    static List<String> values(int n, String prefix) {
        List<String> out = new ArrayList<>();
        for (int i = 0; i < n; i++) out.add(prefix + i);
        return out;
    }

    static List<Object> delivery(ConsumerRecord<String, String> r) {
        return List.of(r.offset(), r.value(), r.deliveryCount().orElse((short) -1));
    }

    /** Polls until `want` records came; `decide` (explicit mode) acknowledges each. */
    static List<ConsumerRecord<String, String>> drain(
            KafkaShareConsumer<String, String> c, int want, java.util.function.Function<ConsumerRecord<String, String>, AcknowledgeType> decide)
            throws Exception {
        List<ConsumerRecord<String, String>> got = new ArrayList<>();
        long deadline = System.currentTimeMillis() + WAIT.toMillis();
        while (got.size() < want) {
            if (System.currentTimeMillis() > deadline) throw new IllegalStateException(got.size() + " of " + want + " records");
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                got.add(r);
                if (decide != null) c.acknowledge(r, decide.apply(r));
            }
        }
        return got;
    }

    /** What still arrives over `millis` of polling. */
    static List<ConsumerRecord<String, String>> quiet(KafkaShareConsumer<String, String> c, long millis) {
        List<ConsumerRecord<String, String>> got = new ArrayList<>();
        long end = System.currentTimeMillis() + millis;
        while (System.currentTimeMillis() < end) {
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) got.add(r);
        }
        return got;
    }

    static List<Object> deliveries(List<ConsumerRecord<String, String>> records) {
        List<Object> out = new ArrayList<>();
        for (ConsumerRecord<String, String> r : records) out.add(delivery(r));
        return out;
    }

    static Map<String, Object> offsets(Admin admin, String group, String topic, int partitions) throws Exception {
        List<TopicPartition> tps = new ArrayList<>();
        for (int p = 0; p < partitions; p++) tps.add(new TopicPartition(topic, p));
        Map<TopicPartition, SharePartitionOffsetInfo> info = admin.listShareGroupOffsets(Map.of(group, new ListShareGroupOffsetsSpec().topicPartitions(tps)))
                .partitionsToOffsetInfo(group)
                .get();
        Map<String, Object> out = new TreeMap<>();
        info.forEach((tp, o) -> {
            Map<String, Object> v = new LinkedHashMap<>();
            v.put("start_offset", o == null ? null : o.startOffset());
            v.put("lag", o == null ? null : o.lag().orElse(null));
            out.put(tp.topic().equals(topic) ? "T:" + tp.partition() : tp.toString(), v);
        });
        return out;
    }

    // -- scenarios -------------------------------------------------------------------------

    /** Implicit acknowledgement: every record once, then nothing; the group's start offset and lag. */
    static Object implicit(JsonNode cmd) throws Exception {
        String bootstrap = cmd.path("bootstrap").asText();
        setUp(cmd, 1, Map.of());
        produce(bootstrap, cmd.path("topic").asText(), values(20, "v"), 5, Map.of());
        Map<String, Object> out = new LinkedHashMap<>();
        try (KafkaShareConsumer<String, String> c = consumer(cmd, Map.of())) {
            List<ConsumerRecord<String, String>> got = drain(c, 20, null);
            out.put("first", deliveries(got));
            out.put("commit", c.commitSync().values().stream().map(e -> e.isPresent() ? e.get().getClass().getSimpleName() : "ok").toList());
            out.put("lock_ms", c.acquisitionLockTimeoutMs().orElse(-1));
        }
        try (KafkaShareConsumer<String, String> c = consumer(cmd, Map.of())) {
            out.put("after", deliveries(quiet(c, 1500)));
        }
        try (Admin admin = admin(bootstrap)) {
            out.put("offsets", offsets(admin, cmd.path("group").asText(), cmd.path("topic").asText(), 1));
        }
        return out;
    }

    /** Explicit ACCEPT, RELEASE and REJECT: the released record comes back once more, the rejected never. */
    static Object explicit(JsonNode cmd) throws Exception {
        String bootstrap = cmd.path("bootstrap").asText();
        setUp(cmd, 1, Map.of());
        produce(bootstrap, cmd.path("topic").asText(), List.of("accept", "release", "reject", "accept-2"), 10, Map.of());
        Map<String, Object> out = new LinkedHashMap<>();
        try (KafkaShareConsumer<String, String> c = consumer(cmd, Map.of("share.acknowledgement.mode", "explicit"))) {
            List<ConsumerRecord<String, String>> got = drain(c, 5, r -> {
                if (r.deliveryCount().orElse((short) 1) > 1) return AcknowledgeType.ACCEPT;
                switch (r.value()) {
                    case "release":
                        return AcknowledgeType.RELEASE;
                    case "reject":
                        return AcknowledgeType.REJECT;
                    default:
                        return AcknowledgeType.ACCEPT;
                }
            });
            out.put("deliveries", deliveries(got));
            c.commitSync();
            out.put("after", deliveries(quiet(c, 1500)));
        }
        return out;
    }

    /** RENEW (KIP-1222) keeps a record past its lock duration; another member never gets it. */
    static Object renew(JsonNode cmd) throws Exception {
        String bootstrap = cmd.path("bootstrap").asText();
        setUp(cmd, 1, Map.of("share.record.lock.duration.ms", "1000"));
        produce(bootstrap, cmd.path("topic").asText(), List.of("slow"), 10, Map.of());
        Map<String, Object> out = new LinkedHashMap<>();
        try (KafkaShareConsumer<String, String> c = consumer(cmd, Map.of("share.acknowledgement.mode", "explicit"));
                KafkaShareConsumer<String, String> other = consumer(cmd, Map.of())) {
            ConsumerRecord<String, String> record = drain(c, 1, null).get(0);
            List<Object> deliveries = new ArrayList<>(List.of(delivery(record)));
            List<Object> renewals = new ArrayList<>();
            List<ConsumerRecord<String, String>> stolen = new ArrayList<>();
            boolean inFlight = true;
            long end = System.currentTimeMillis() + 3000;
            while (System.currentTimeMillis() < end || !inFlight) {  // three lock durations of work, renewing as it goes
                if (System.currentTimeMillis() > end + WAIT.toMillis()) throw new IllegalStateException("the renewed record never came back");
                if (inFlight) {
                    c.acknowledge(record, AcknowledgeType.RENEW);
                    c.commitSync().values().forEach(e -> renewals.add(e.isPresent() ? e.get().getClass().getSimpleName() : "ok"));
                    inFlight = false;
                }
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(300))) {  // a renewed record comes back
                    if (r.offset() == record.offset()) {
                        record = r;
                        inFlight = true;
                        deliveries.add(delivery(r));
                    }
                }
                for (ConsumerRecord<String, String> r : other.poll(Duration.ofMillis(100))) stolen.add(r);
            }
            c.acknowledge(record, AcknowledgeType.ACCEPT);
            out.put("accept", c.commitSync().values().stream().map(e -> e.isPresent() ? e.get().getClass().getSimpleName() : "ok").toList());
            out.put("deliveries", new java.util.TreeSet<>(deliveries.stream().map(Object::toString).toList()).stream().toList());
            out.put("renewals_ok", renewals.stream().allMatch("ok"::equals) && renewals.size() >= 3);
            out.put("stolen", deliveries(stolen));
        }
        return out;
    }

    /** share.acquire.mode=record_limit: no poll returns more than max.poll.records. */
    static Object recordLimit(JsonNode cmd) throws Exception {
        String bootstrap = cmd.path("bootstrap").asText();
        setUp(cmd, 1, Map.of());
        produce(bootstrap, cmd.path("topic").asText(), values(10, "v"), 10, Map.of());
        List<Integer> sizes = new ArrayList<>();
        List<Object> got = new ArrayList<>();
        try (KafkaShareConsumer<String, String> c = consumer(cmd, Map.of("share.acquire.mode", "record_limit", "max.poll.records", "3"))) {
            long deadline = System.currentTimeMillis() + WAIT.toMillis();
            while (got.size() < 10 && System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> records = c.poll(Duration.ofMillis(200));
                if (records.count() > 0) sizes.add(records.count());
                for (ConsumerRecord<String, String> r : records) got.add(delivery(r));
            }
            c.commitSync();
        }
        return Map.of("poll_sizes", sizes, "deliveries", got);
    }

    /** `consumers` members share one partition: each record goes to exactly one of them, once. */
    static Object manyConsumers(JsonNode cmd) throws Exception {
        String bootstrap = cmd.path("bootstrap").asText();
        String group = cmd.path("group").asText();
        int n = cmd.path("consumers").asInt(4);
        int total = cmd.path("records").asInt(600);
        setUp(cmd, 1, Map.of("share.partition.max.record.locks", "100"));
        Map<Integer, List<List<Object>>> seen = new ConcurrentHashMap<>();
        AtomicBoolean stop = new AtomicBoolean();
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            final int who = i;
            Thread t = new Thread(() -> {
                try (KafkaShareConsumer<String, String> c = consumer(cmd, Map.of())) {
                    while (!stop.get()) {
                        for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                            seen.computeIfAbsent(who, k -> Collections.synchronizedList(new ArrayList<>()))
                                    .add(List.of(r.offset(), r.deliveryCount().orElse((short) -1)));
                            Thread.sleep(5);  // some work per record, so the others get their share
                        }
                    }
                    c.commitSync();
                } catch (Exception e) {
                    e.printStackTrace(System.err);
                }
            });
            t.start();
            threads.add(t);
        }
        try (Admin admin = admin(bootstrap)) {
            long deadline = System.currentTimeMillis() + WAIT.toMillis();
            while (true) {  // every member holds the partition before the records come
                long assigned = 0;
                try {
                    ShareGroupDescription d = admin.describeShareGroups(List.of(group)).describedGroups().get(group).get();
                    assigned = d.members().stream().filter(m -> !m.assignment().topicPartitions().isEmpty()).count();
                } catch (ExecutionException e) {
                    // the group is not there before its first member joins
                }
                if (assigned == n) break;
                if (System.currentTimeMillis() > deadline) throw new IllegalStateException(assigned + " members assigned");
                Thread.sleep(50);
            }
            produce(bootstrap, cmd.path("topic").asText(), values(total, ""), 10, Map.of());
            while (seen.values().stream().mapToInt(List::size).sum() < total) {
                if (System.currentTimeMillis() > deadline + WAIT.toMillis()) break;
                Thread.sleep(20);
            }
        } finally {
            stop.set(true);
            for (Thread t : threads) t.join(30000);
        }
        List<List<Object>> all = new ArrayList<>();
        seen.values().forEach(all::addAll);
        all.sort((a, b) -> Long.compare((Long) a.get(0), (Long) b.get(0)));
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("deliveries", all);
        out.put("consumers_with_records", seen.values().stream().filter(v -> !v.isEmpty()).count());
        return out;
    }

    /** A member that stops polling: its locks time out and another member gets its records. */
    static Object lockTimeout(JsonNode cmd) throws Exception {
        String bootstrap = cmd.path("bootstrap").asText();
        setUp(cmd, 1, Map.of("share.record.lock.duration.ms", "1000"));
        produce(bootstrap, cmd.path("topic").asText(), values(5, "v"), 5, Map.of());
        Map<String, Object> out = new LinkedHashMap<>();
        try (KafkaShareConsumer<String, String> slow = consumer(cmd, Map.of("share.acknowledgement.mode", "explicit"));
                KafkaShareConsumer<String, String> fast = consumer(cmd, Map.of())) {
            List<ConsumerRecord<String, String>> held = drain(slow, 5, null);
            out.put("held", deliveries(held));
            List<ConsumerRecord<String, String>> got = drain(fast, 5, null);
            out.put("redelivered", deliveries(got));
            fast.commitSync();
            // the slow member's late acknowledgement fails: the records are not its own any more
            for (ConsumerRecord<String, String> r : held) slow.acknowledge(r, AcknowledgeType.ACCEPT);
            out.put("late_acknowledgement", slow.commitSync().values().stream().map(e -> e.isPresent() ? e.get().getClass().getSimpleName() : "ok").toList());
        }
        return out;
    }

    /** A record the application always fails on is archived at the delivery limit; the rest flow on. */
    static Object poison(JsonNode cmd) throws Exception {
        String bootstrap = cmd.path("bootstrap").asText();
        setUp(cmd, 1, Map.of("share.delivery.count.limit", "3"));
        produce(bootstrap, cmd.path("topic").asText(), List.of("ok-1", "poison", "ok-2"), 10, Map.of());
        Map<String, Object> out = new LinkedHashMap<>();
        try (KafkaShareConsumer<String, String> c = consumer(cmd, Map.of("share.acknowledgement.mode", "explicit"))) {
            List<ConsumerRecord<String, String>> got = drain(c, 5, r -> "poison".equals(r.value()) ? AcknowledgeType.RELEASE : AcknowledgeType.ACCEPT);
            c.commitSync();
            out.put("deliveries", deliveries(got));
            out.put("after", deliveries(quiet(c, 1500)));
        }
        produce(bootstrap, cmd.path("topic").asText(), List.of("after"), 10, Map.of());
        try (KafkaShareConsumer<String, String> c = consumer(cmd, Map.of())) {
            out.put("later", deliveries(drain(c, 1, null)));
        }
        return out;
    }

    /** share.isolation.level: read_committed never delivers an aborted transaction's records. */
    static Object readCommitted(JsonNode cmd) throws Exception {
        String bootstrap = cmd.path("bootstrap").asText();
        String topic = cmd.path("topic").asText();
        setUp(cmd, 1, Map.of("share.isolation.level", "read_committed"));
        String uncommitted = cmd.path("group").asText() + "-uncommitted";
        try (Admin admin = admin(bootstrap)) {
            setGroupConfigs(admin, uncommitted, Map.of("share.auto.offset.reset", "earliest"));
        }
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("transactional.id", "tx-" + cmd.path("group").asText());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
            producer.initTransactions();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, 0, null, "aborted"));
            producer.flush();
            producer.abortTransaction();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, 0, null, "committed"));
            producer.commitTransaction();
        }
        Map<String, Object> out = new LinkedHashMap<>();
        try (KafkaShareConsumer<String, String> c = consumer(cmd, Map.of())) {
            List<ConsumerRecord<String, String>> got = drain(c, 1, null);
            got.addAll(quiet(c, 1000));
            out.put("read_committed", got.stream().map(ConsumerRecord::value).toList());
            c.commitSync();
        }
        Properties q = new Properties();
        q.put("bootstrap.servers", bootstrap);
        q.put("group.id", uncommitted);
        try (KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(q, new StringDeserializer(), new StringDeserializer())) {
            c.subscribe(List.of(topic));
            List<String> got = new ArrayList<>(drain(c, 2, null).stream().map(ConsumerRecord::value).toList());
            got.sort(null);
            out.put("read_uncommitted", got);
            c.commitSync();
        }
        return out;
    }

    /**
     * A consumer killed (SIGKILL, its own JVM: ShareHolder) with records acquired, half of them
     * accepted and committed: the held half comes to another member with its second delivery, the
     * accepted half never again; `before_the_lock_ran_out` tells whether they came before the 15 s
     * lock would have run out (as when the broker releases a closed connection's records).
     */
    static Object killedConsumer(JsonNode cmd) throws Exception {
        String bootstrap = cmd.path("bootstrap").asText();
        long lockMs = 15000;
        setUp(cmd, 1, Map.of("share.record.lock.duration.ms", Long.toString(lockMs)));
        produce(bootstrap, cmd.path("topic").asText(), values(10, "v"), 10, Map.of());
        List<String> command = new ArrayList<>(List.of(java.nio.file.Path.of(System.getProperty("java.home"), "bin", "java").toString(), "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"));
        String log4j = System.getProperty("log4j2.configurationFile");
        if (log4j != null) command.add("-Dlog4j2.configurationFile=" + log4j);
        command.addAll(List.of("-cp", System.getProperty("java.class.path"), ShareHolder.class.getName(), bootstrap, cmd.path("group").asText(), cmd.path("topic").asText()));
        Process holder = new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.DISCARD).start();
        Map<String, Object> out = new LinkedHashMap<>();
        try {
            BufferedReader lines = new BufferedReader(new InputStreamReader(holder.getInputStream(), StandardCharsets.UTF_8));
            JsonNode held = null;
            for (String line = lines.readLine(); line != null && held == null; line = held == null ? lines.readLine() : null) {
                if (line.startsWith("{")) held = JSON.readTree(line);
            }
            if (held == null) throw new IllegalStateException("the holder ended without holding records");
            out.put("holder", JSON.convertValue(held, Map.class));
            holder.destroyForcibly();  // SIGKILL: no LeaveGroup, no acknowledgement, no close
            holder.waitFor();
            long killedAt = System.currentTimeMillis();
            try (KafkaShareConsumer<String, String> c = consumer(cmd, Map.of())) {
                List<ConsumerRecord<String, String>> got = drain(c, held.path("held").size(), null);
                out.put("before_the_lock_ran_out", System.currentTimeMillis() - killedAt < lockMs);
                List<List<Object>> redelivered = new ArrayList<>();
                for (ConsumerRecord<String, String> r : got) redelivered.add(delivery(r));
                redelivered.sort((a, b) -> Long.compare((Long) a.get(0), (Long) b.get(0)));
                out.put("redelivered", redelivered);
                c.commitSync();
                out.put("after", deliveries(quiet(c, 1500)));
            }
        } finally {
            holder.destroyForcibly();
            holder.waitFor();
        }
        return out;
    }

    /**
     * The broker is SIGKILLed and restarted by the caller while this consumer accepts record by
     * record, committing each poll's acknowledgements (explicit mode, at most 50 records a poll).
     * It writes how many records are known done (commitSync answered without error) to the file
     * `progress` after each commit; the caller touches `restarted` once the broker is back. It reads
     * until it has seen every record and the broker was restarted, then 2 s more: no record known
     * done may come again, none may be missing.
     */
    static Object brokerSigkill(JsonNode cmd) throws Exception {
        String bootstrap = cmd.path("bootstrap").asText();
        int total = cmd.path("records").asInt(600);
        java.nio.file.Path progress = java.nio.file.Path.of(cmd.path("progress").asText());
        java.nio.file.Path restarted = java.nio.file.Path.of(cmd.path("restarted").asText());
        setUp(cmd, 1, Map.of("share.partition.max.record.locks", "100", "share.session.timeout.ms", "6000"));
        produce(bootstrap, cmd.path("topic").asText(), values(total, "v"), 10, Map.of());
        Set<Long> done = new java.util.HashSet<>();
        Set<Long> seen = new java.util.HashSet<>();
        List<Long> redeliveredAfterDone = new ArrayList<>();
        int failedCommits = 0;
        int pollErrors = 0;
        long workMs = cmd.path("work_ms").asLong(50);
        // at most 50 records a poll and some work on each poll: the caller's kill falls mid-stream
        Map<String, String> config = Map.of("share.acknowledgement.mode", "explicit", "share.acquire.mode", "record_limit", "max.poll.records", "50");
        try (KafkaShareConsumer<String, String> c = consumer(cmd, config)) {
            long deadline = System.currentTimeMillis() + 120_000;
            long quietUntil = -1;
            while (quietUntil < 0 || System.currentTimeMillis() < quietUntil) {
                if (System.currentTimeMillis() > deadline) throw new IllegalStateException(seen.size() + " of " + total + " records seen");
                if (quietUntil < 0 && seen.size() == total && java.nio.file.Files.exists(restarted)) quietUntil = System.currentTimeMillis() + 2000;
                ConsumerRecords<String, String> records;
                try {
                    records = c.poll(Duration.ofMillis(200));
                } catch (org.apache.kafka.common.KafkaException e) {
                    pollErrors++;  // the broker is away: poll on
                    continue;
                }
                List<Long> offsets = new ArrayList<>();
                for (ConsumerRecord<String, String> r : records) {
                    if (done.contains(r.offset())) redeliveredAfterDone.add(r.offset());
                    seen.add(r.offset());
                    offsets.add(r.offset());
                    c.acknowledge(r, AcknowledgeType.ACCEPT);
                }
                if (offsets.isEmpty()) continue;
                Thread.sleep(workMs);
                try {
                    var results = c.commitSync(Duration.ofSeconds(10));
                    if (!results.isEmpty() && results.values().stream().allMatch(e -> e.isEmpty())) done.addAll(offsets);
                    else failedCommits++;
                } catch (org.apache.kafka.common.KafkaException e) {
                    failedCommits++;  // no answer: nothing of this poll is known done
                }
                java.nio.file.Files.writeString(progress.resolveSibling(progress.getFileName() + ".tmp"), Integer.toString(done.size()));
                java.nio.file.Files.move(
                        progress.resolveSibling(progress.getFileName() + ".tmp"), progress, java.nio.file.StandardCopyOption.REPLACE_EXISTING, java.nio.file.StandardCopyOption.ATOMIC_MOVE);
            }
        }
        List<Long> lost = new ArrayList<>();
        for (long o = 0; o < total; o++) if (!seen.contains(o)) lost.add(o);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("seen", seen.size());
        out.put("done", done.size());
        out.put("lost", lost);
        out.put("redelivered_after_done", redeliveredAfterDone);
        out.put("failed_commits", failedCommits);
        out.put("poll_errors", pollErrors);
        return out;
    }

    /** Admin's share-group calls and kafka-share-groups, with a member and without. */
    static Object adminScenario(JsonNode cmd) throws Exception {
        String bootstrap = cmd.path("bootstrap").asText();
        String group = cmd.path("group").asText();
        String topic = cmd.path("topic").asText();
        setUp(cmd, 2, Map.of());
        produce(bootstrap, topic, values(6, "v"), 3, Map.of());
        Map<String, Object> out = new LinkedHashMap<>();
        try (Admin admin = admin(bootstrap)) {
            try (KafkaShareConsumer<String, String> c = consumer(cmd, Map.of())) {
                drain(c, 6, null);
                c.commitSync();
                long deadline = System.currentTimeMillis() + WAIT.toMillis();
                ShareGroupDescription d;
                while (true) {
                    d = admin.describeShareGroups(List.of(group)).describedGroups().get(group).get();
                    if (d.members().size() == 1 && d.members().iterator().next().assignment().topicPartitions().size() == 2) break;
                    if (System.currentTimeMillis() > deadline) throw new IllegalStateException("not assigned: " + d);
                    Thread.sleep(50);
                }
                out.put("describe", describe(d, topic));
                List<Object> listed = new ArrayList<>();
                for (GroupListing g : admin.listGroups(new ListGroupsOptions().withTypes(Set.of(GroupType.SHARE))).all().get()) {
                    if (g.groupId().equals(group)) listed.add(List.of(g.type().map(Object::toString).orElse("?"), g.groupState().map(Object::toString).orElse("?"), g.protocol()));
                }
                out.put("list", listed);
                out.put("offsets", offsets(admin, group, topic, 2));
                out.put("alter_while_active", outcome(() -> admin.alterShareGroupOffsets(group, Map.of(new TopicPartition(topic, 0), 1L)).all().get()));
                out.put("tool_describe", tool("--bootstrap-server", bootstrap, "--describe", "--group", group));
                out.put("tool_members", tool("--bootstrap-server", bootstrap, "--describe", "--members", "--group", group));
                out.put("tool_state", tool("--bootstrap-server", bootstrap, "--describe", "--state", "--group", group));
            }
            long deadline = System.currentTimeMillis() + WAIT.toMillis();
            while (!admin.describeShareGroups(List.of(group)).describedGroups().get(group).get().members().isEmpty()) {
                if (System.currentTimeMillis() > deadline) throw new IllegalStateException("member stayed");
                Thread.sleep(50);
            }
            out.put("alter", outcome(() -> admin.alterShareGroupOffsets(group, Map.of(new TopicPartition(topic, 0), 1L, new TopicPartition(topic, 1), 0L)).all().get()));
            out.put("offsets_after_alter", offsets(admin, group, topic, 2));
            try (KafkaShareConsumer<String, String> c = consumer(cmd, Map.of())) {
                List<ConsumerRecord<String, String>> again = drain(c, 5, null);
                List<Object> got = new ArrayList<>();
                for (ConsumerRecord<String, String> r : again) got.add(List.of(r.partition(), r.offset(), r.deliveryCount().orElse((short) -1)));
                got.sort((a, b) -> ((List<?>) a).toString().compareTo(((List<?>) b).toString()));
                out.put("after_alter", got);
                c.commitSync();
            }
            deadline = System.currentTimeMillis() + WAIT.toMillis();
            while (!admin.describeShareGroups(List.of(group)).describedGroups().get(group).get().members().isEmpty()) {
                if (System.currentTimeMillis() > deadline) throw new IllegalStateException("member stayed");
                Thread.sleep(50);
            }
            out.put("tool_offsets_empty", tool("--bootstrap-server", bootstrap, "--describe", "--group", group));
            out.put("delete_offsets", outcome(() -> admin.deleteShareGroupOffsets(group, Set.of(topic)).all().get()));
            out.put("offsets_after_delete", offsets(admin, group, topic, 2));
            out.put("delete_group", outcome(() -> admin.deleteShareGroups(List.of(group)).all().get()));
            out.put("describe_deleted", outcome(() -> admin.describeShareGroups(List.of(group)).describedGroups().get(group).get().groupState()));
            out.put("delete_unknown", outcome(() -> admin.deleteShareGroups(List.of(group + "-nope")).all().get()));
        }
        return out;
    }

    interface Call {
        Object run() throws Exception;
    }

    static Object outcome(Call call) {
        try {
            Object v = call.run();
            return v == null ? "ok" : v.toString();
        } catch (Exception e) {
            return error(e).get("type");
        }
    }

    static Map<String, Object> describe(ShareGroupDescription d, String topic) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("state", d.groupState().toString());
        out.put("group_epoch", d.groupEpoch());
        out.put("assignment_epoch", d.targetAssignmentEpoch());
        List<Object> members = new ArrayList<>();
        for (ShareMemberDescription m : d.members()) {
            List<String> parts = new ArrayList<>();
            m.assignment().topicPartitions().forEach(tp -> parts.add((tp.topic().equals(topic) ? "T" : tp.topic()) + ":" + tp.partition()));
            parts.sort(null);
            members.add(List.of(m.memberEpoch(), m.clientId().isEmpty() ? "" : "client", m.rackId().orElse("none"), parts));
        }
        out.put("members", members);
        return out;
    }

    /** kafka-share-groups: its exit status and output, as a user sees them. */
    static Map<String, Object> tool(String... args) {
        ByteArrayOutputStream buffer = new ByteArrayOutputStream();
        TOOL_OUT.set(buffer);
        int status = 0;
        try {
            ShareGroupCommand.main(args);
        } catch (ExitCalled e) {
            status = e.status;
        } finally {
            TOOL_OUT.remove();
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("status", status);
        out.put("out", buffer.toString(StandardCharsets.UTF_8));
        return out;
    }
}
