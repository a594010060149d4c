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
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DeleteConsumerGroupOffsetsResult;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListTransactionsOptions;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.MemberToRemove;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.RemoveMembersFromConsumerGroupOptions;
import org.apache.kafka.clients.admin.RemoveMembersFromConsumerGroupResult;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.internals.Exit;
import org.apache.kafka.tools.consumer.group.ConsumerGroupCommand;

/**
 * Runs client scenarios for the differential tests: one JSON command per stdin line, one JSON
 * answer per stdout line ({"id", "ok", "result"} or {"id", "ok": false, "error": {"type",
 * "message"}}). Commands run concurrently (each on its own thread), so a scenario runs against
 * kaflet and Kafka at once. Consumers are named, long-lived members: each polls on a thread of
 * its own and runs the commands addressed to it there (KafkaConsumer is single-threaded).
 */
public final class ClientDriver {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final PrintStream ANSWERS = System.out;
    private static final ExecutorService POOL = Executors.newCachedThreadPool();
    private static final Map<String, Member> MEMBERS = new ConcurrentHashMap<>();
    private static final Map<String, KafkaProducer<String, String>> PRODUCERS = new ConcurrentHashMap<>();
    // kafka-consumer-groups prints to System.out/err: each thread's output goes to its own buffer.
    private static final ThreadLocal<ByteArrayOutputStream> TOOL_OUT = new ThreadLocal<>();
    private static final ThreadLocal<ByteArrayOutputStream> TOOL_ERR = new ThreadLocal<>();

    private ClientDriver() {}

    /** Kafka's tools end with Exit.exit(); here that ends one command, not the JVM. */
    static final class ExitCalled extends RuntimeException {
        final int status;

        ExitCalled(int status) {
            super("exit " + status);
            this.status = status;
        }
    }

    public static void main(String[] args) throws Exception {
        System.setOut(new PrintStream(new Routed(TOOL_OUT, System.err), true, StandardCharsets.UTF_8));
        System.setErr(new PrintStream(new Routed(TOOL_ERR, System.err), true, StandardCharsets.UTF_8));
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
        for (Member m : MEMBERS.values()) m.stop();
        for (KafkaProducer<String, String> p : PRODUCERS.values()) p.close(Duration.ofSeconds(5));
        POOL.shutdownNow();
        System.exit(0);
    }

    /** A stream that writes to the current thread's buffer when it has one, else to `fallback`. */
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
        public void write(int b) {
            try {
                target().write(b);
            } catch (java.io.IOException e) {
                throw new RuntimeException(e);
            }
        }

        @Override
        public void write(byte[] b, int off, int len) {
            try {
                target().write(b, off, len);
            } catch (java.io.IOException e) {
                throw new RuntimeException(e);
            }
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
            e.printStackTrace(ANSWERS);
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
        if (t.getCause() != null && t.getCause() != t) e.put("cause", t.getCause().getClass().getSimpleName());
        return e;
    }

    private static Object dispatch(String op, JsonNode cmd) throws Exception {
        switch (op) {
            case "create_topics":
                return createTopics(cmd);
            case "produce":
                return produce(cmd);
            case "producer_send":
                return producerSend(cmd);
            case "producer_close":
                return producerClose(cmd);
            case "txn_begin":
                return txnBegin(cmd);
            case "txn_end":
                return txnEnd(cmd);
            case "read":
                return read(cmd);
            case "member_start":
                return memberStart(cmd);
            case "group_wait":
                return groupWait(cmd);
            case "member_call":
                return memberCall(cmd);
            case "member_close":
                return memberClose(cmd);
            case "admin":
                return admin(cmd);
            case "tool":
                return tool(cmd);
            default:
                throw new IllegalArgumentException("unknown op " + op);
        }
    }

    // -- helpers ---------------------------------------------------------------------------

    static Properties props(JsonNode cmd) {
        Properties p = new Properties();
        p.put("bootstrap.servers", cmd.path("bootstrap").asText());
        cmd.path("props").fields().forEachRemaining(e -> p.put(e.getKey(), e.getValue().asText()));
        return p;
    }

    static Admin admin(JsonNode cmd, Function<Properties, Properties> f) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, cmd.path("bootstrap").asText());
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        return Admin.create(f.apply(p));
    }

    static List<String> strings(JsonNode node) {
        List<String> out = new ArrayList<>();
        node.forEach(n -> out.add(n.asText()));
        return out;
    }

    static TopicPartition tp(String text) {
        int colon = text.lastIndexOf(':');
        return new TopicPartition(text.substring(0, colon), Integer.parseInt(text.substring(colon + 1)));
    }

    static String tpName(TopicPartition tp) {
        return tp.topic() + ":" + tp.partition();
    }

    static List<String> tpNames(Collection<TopicPartition> tps) {
        List<String> out = new ArrayList<>();
        for (TopicPartition t : tps) out.add(tpName(t));
        out.sort(null);
        return out;
    }

    static Map<String, Object> offsetsMap(Map<TopicPartition, OffsetAndMetadata> offsets) {
        Map<String, Object> out = new TreeMap<>();
        offsets.forEach((t, o) -> {
            if (o == null) {
                out.put(tpName(t), null);
            } else {
                Map<String, Object> v = new LinkedHashMap<>();
                v.put("offset", o.offset());
                v.put("metadata", o.metadata());
                v.put("leader_epoch", o.leaderEpoch().orElse(null));
                out.put(tpName(t), v);
            }
        });
        return out;
    }

    /** Each future's value, or its error: {"value": ...} or {"error": {...}}. */
    static <T> Map<String, Object> settle(KafkaFuture<T> future, Function<T, Object> view) {
        Map<String, Object> out = new LinkedHashMap<>();
        try {
            out.put("value", view.apply(future.get(60, TimeUnit.SECONDS)));
        } catch (Throwable t) {
            out.put("error", error(t));
        }
        return out;
    }

    // -- topics and records ----------------------------------------------------------------

    static Object createTopics(JsonNode cmd) throws Exception {
        try (Admin admin = admin(cmd, p -> p)) {
            List<NewTopic> topics = new ArrayList<>();
            cmd.path("topics").fields().forEachRemaining(e -> topics.add(new NewTopic(e.getKey(), e.getValue().asInt(), (short) 1)));
            admin.createTopics(topics).all().get(60, TimeUnit.SECONDS);
            // Kafka answers CreateTopics before its metadata (which the group coordinator reads)
            // has every partition's leader: a consumer subscribing at once would see the topic
            // appear later, one group epoch more. Wait until it is there, as kaflet has it at once.
            List<String> names = topics.stream().map(NewTopic::name).toList();
            long deadline = System.currentTimeMillis() + 30000;
            while (true) {
                boolean ready = true;
                for (var d : admin.describeTopics(names).allTopicNames().get(60, TimeUnit.SECONDS).values()) {
                    for (var p : d.partitions()) ready &= p.leader() != null && !p.leader().isEmpty();
                }
                if (ready) return topics.size();
                if (System.currentTimeMillis() > deadline) throw new IllegalStateException("topics without leaders: " + names);
                Thread.sleep(20);
            }
        }
    }

    static KafkaProducer<String, String> producer(JsonNode cmd, Properties extra) {
        Properties p = props(cmd);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.LINGER_MS_CONFIG, "0");
        p.putAll(extra);
        return new KafkaProducer<>(p);
    }

    static List<Object> send(KafkaProducer<String, String> producer, JsonNode cmd) throws Exception {
        String topic = cmd.path("topic").asText();
        List<java.util.concurrent.Future<RecordMetadata>> futures = new ArrayList<>();
        for (JsonNode r : cmd.path("records")) {
            Integer partition = r.get(0).isNull() ? null : r.get(0).asInt();
            String key = r.get(1).isNull() ? null : r.get(1).asText();
            futures.add(producer.send(new ProducerRecord<>(topic, partition, key, r.get(2).asText())));
        }
        producer.flush();
        List<Object> out = new ArrayList<>();
        for (var f : futures) {
            RecordMetadata md = f.get(60, TimeUnit.SECONDS);
            out.add(List.of(md.partition(), md.offset()));
        }
        return out;
    }

    /** Records with a plain (idempotent, acks=all) producer: [partition, offset] of each. */
    static Object produce(JsonNode cmd) throws Exception {
        try (KafkaProducer<String, String> producer = producer(cmd, new Properties())) {
            return send(producer, cmd);
        }
    }

    /** Records with a producer kept open under `name` (made at its first send): [partition, offset] of
     * each, and how long the send took until every record was acknowledged. */
    static Object producerSend(JsonNode cmd) throws Exception {
        KafkaProducer<String, String> producer = PRODUCERS.computeIfAbsent(cmd.path("name").asText(), n -> producer(cmd, new Properties()));
        long started = System.nanoTime();
        List<Object> sent = send(producer, cmd);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("sent", sent);
        out.put("ms", TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started));
        return out;
    }

    static Object producerClose(JsonNode cmd) {
        KafkaProducer<String, String> producer = PRODUCERS.remove(cmd.path("name").asText());
        if (producer != null) producer.close(Duration.ofSeconds(10));
        return "closed";
    }

    /** A transactional producer: initTransactions, beginTransaction, records, offsets; kept open under `name`. */
    static Object txnBegin(JsonNode cmd) throws Exception {
        String name = cmd.path("name").asText();
        Properties extra = new Properties();
        extra.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, cmd.path("transactional_id").asText());
        KafkaProducer<String, String> producer = PRODUCERS.get(name);
        if (producer == null) {
            producer = producer(cmd, extra);
            producer.initTransactions();
            PRODUCERS.put(name, producer);
        }
        producer.beginTransaction();
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("sent", send(producer, cmd));
        if (cmd.has("group")) {
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            cmd.path("offsets").fields().forEachRemaining(e -> offsets.put(tp(e.getKey()), new OffsetAndMetadata(e.getValue().asLong())));
            producer.sendOffsetsToTransaction(offsets, new org.apache.kafka.clients.consumer.ConsumerGroupMetadata(cmd.path("group").asText()));
        }
        return out;
    }

    static Object txnEnd(JsonNode cmd) throws Exception {
        String name = cmd.path("name").asText();
        KafkaProducer<String, String> producer = PRODUCERS.get(name);
        if (cmd.path("commit").asBoolean()) producer.commitTransaction();
        else producer.abortTransaction();
        if (cmd.path("close").asBoolean(true)) {
            PRODUCERS.remove(name);
            producer.close(Duration.ofSeconds(10));
        }
        return "done";
    }

    /** Reads partitions from the beginning (assign mode, no group) until `expect` records or the end. */
    static Object read(JsonNode cmd) {
        Properties p = props(cmd);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, cmd.path("isolation").asText("read_uncommitted"));
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (String t : strings(cmd.path("partitions"))) tps.add(tp(t));
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            int expect = cmd.path("expect").asInt();
            List<Object> records = new ArrayList<>();
            long deadline = System.currentTimeMillis() + cmd.path("timeout_ms").asLong(20000);
            while (records.size() < expect && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(100))) records.add(record(r));
            }
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("records", records);
            Map<String, Object> positions = new TreeMap<>();
            for (TopicPartition t : tps) positions.put(tpName(t), consumer.position(t));
            out.put("positions", positions);
            return out;
        }
    }

    static List<Object> record(ConsumerRecord<String, String> r) {
        List<Object> out = new ArrayList<>();
        out.add(tpName(new TopicPartition(r.topic(), r.partition())));
        out.add(r.offset());
        out.add(r.key());
        out.add(r.value());
        return out;
    }

    // -- group members ---------------------------------------------------------------------

    /** A KafkaConsumer polling on its own thread; commands for it run between polls. */
    static final class Member implements Runnable {
        final String name;
        final KafkaConsumer<String, String> consumer;
        final LinkedBlockingQueue<Runnable> tasks = new LinkedBlockingQueue<>();
        final List<Object> records = new ArrayList<>();
        volatile Set<TopicPartition> assignment = Set.of();
        volatile long changedAt = System.nanoTime();
        volatile Map<String, Object> failure;
        volatile boolean running = true;
        final Thread thread;

        Member(String name, KafkaConsumer<String, String> consumer) {
            this.name = name;
            this.consumer = consumer;
            this.thread = new Thread(this, "member-" + name);
        }

        @Override
        public void run() {
            while (running) {
                Runnable task;
                while ((task = tasks.poll()) != null) task.run();
                if (!running) break;
                try {
                    var batch = consumer.poll(Duration.ofMillis(50));
                    synchronized (records) {
                        for (ConsumerRecord<String, String> r : batch) records.add(record(r));
                    }
                    Set<TopicPartition> now = Set.copyOf(consumer.assignment());
                    if (!now.equals(assignment)) {
                        assignment = now;
                        changedAt = System.nanoTime();
                    }
                } catch (Throwable t) {
                    failure = error(t);
                    changedAt = System.nanoTime();
                    try {
                        Thread.sleep(50);
                    } catch (InterruptedException e) {
                        return;
                    }
                }
            }
        }

        /** Runs `f` on the member's thread and waits for its value. */
        <T> T call(Function<KafkaConsumer<String, String>, T> f) throws Exception {
            CompletableFuture<T> done = new CompletableFuture<>();
            tasks.add(() -> {
                try {
                    done.complete(f.apply(consumer));
                } catch (Throwable t) {
                    done.completeExceptionally(t);
                }
            });
            return done.get(60, TimeUnit.SECONDS);
        }

        void stop() {
            running = false;
            try {
                thread.join(30000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    static Object memberStart(JsonNode cmd) {
        String name = cmd.path("name").asText();
        Properties p = props(cmd);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, cmd.path("group").asText());
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, cmd.path("client_id").asText(name));
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, cmd.path("protocol").asText("classic"));
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        if (cmd.has("instance_id")) p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, cmd.path("instance_id").asText());
        if (!"consumer".equals(cmd.path("protocol").asText())) {
            // The classic protocol's heartbeat carries REBALANCE_IN_PROGRESS: at Kafka's default
            // 3 s a rejoin would wait that long on either broker.
            p.putIfAbsent(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "200");
        }
        KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p);
        consumer.subscribe(strings(cmd.path("topics")));
        Member m = new Member(name, consumer);
        if (MEMBERS.putIfAbsent(name, m) != null) {
            consumer.close();
            throw new IllegalArgumentException("member " + name + " exists");
        }
        m.thread.start();
        return name;
    }

    /**
     * Until the named members' assignments cover `partitions` partitions exactly once, each holds
     * its fair share (floor or ceiling of partitions/members) and nothing changed for `quiet_ms`,
     * and they have delivered at least `records` records. Returns each member's partitions.
     */
    static Object groupWait(JsonNode cmd) throws Exception {
        List<Member> members = new ArrayList<>();
        for (String n : strings(cmd.path("names"))) members.add(member(n));
        int partitions = cmd.path("partitions").asInt();
        int records = cmd.path("records").asInt(0);
        long quietNs = TimeUnit.MILLISECONDS.toNanos(cmd.path("quiet_ms").asLong(300));
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(cmd.path("timeout_ms").asLong(60000));
        int low = partitions / members.size(), high = (partitions + members.size() - 1) / members.size();
        while (true) {
            Set<TopicPartition> union = new HashSet<>();
            int count = 0, delivered = 0;
            boolean fair = true;
            long last = 0;
            for (Member m : members) {
                Set<TopicPartition> a = m.assignment;
                union.addAll(a);
                count += a.size();
                fair &= a.size() >= low && a.size() <= high;
                last = Math.max(last, m.changedAt);
                synchronized (m.records) {
                    delivered += m.records.size();
                }
            }
            boolean stable = fair && count == partitions && union.size() == partitions && System.nanoTime() - last >= quietNs;
            if (stable && delivered >= records) {
                Map<String, Object> out = new TreeMap<>();
                for (Member m : members) out.put(m.name, tpNames(m.assignment));
                return out;
            }
            if (System.nanoTime() > deadline) {
                Map<String, Object> state = new TreeMap<>();
                for (Member m : members) state.put(m.name, Map.of("assignment", tpNames(m.assignment), "failure", String.valueOf(m.failure)));
                throw new IllegalStateException("group not stable: " + JSON.writeValueAsString(state) + " delivered " + delivered);
            }
            Thread.sleep(20);
        }
    }

    static Member member(String name) {
        Member m = MEMBERS.get(name);
        if (m == null) throw new IllegalArgumentException("no member " + name);
        return m;
    }

    /** One call on a member: commit (sync, of its position or given offsets), records, committed, position. */
    static Object memberCall(JsonNode cmd) throws Exception {
        Member m = member(cmd.path("name").asText());
        String call = cmd.path("call").asText();
        switch (call) {
            case "commit":
                return m.call(c -> {
                    if (cmd.has("offsets")) {
                        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                        cmd.path("offsets").fields().forEachRemaining(e -> offsets.put(tp(e.getKey()), new OffsetAndMetadata(e.getValue().asLong(), cmd.path("metadata").asText(""))));
                        c.commitSync(offsets);
                    } else {
                        c.commitSync();
                    }
                    return "committed";
                });
            case "records":
                synchronized (m.records) {
                    List<Object> copy = new ArrayList<>(m.records);
                    copy.sort((a, b) -> String.valueOf(a).compareTo(String.valueOf(b)));
                    return copy;
                }
            case "committed":
                return m.call(c -> offsetsMap(c.committed(c.assignment())));
            case "failure":
                return m.failure;
            default:
                throw new IllegalArgumentException("unknown member call " + call);
        }
    }

    static Object memberClose(JsonNode cmd) throws Exception {
        Member m = MEMBERS.remove(cmd.path("name").asText());
        if (m == null) throw new IllegalArgumentException("no member " + cmd.path("name").asText());
        CompletableFuture<Void> closed = new CompletableFuture<>();
        m.tasks.add(() -> {
            try {
                m.consumer.close(Duration.ofSeconds(30));
                closed.complete(null);
            } catch (Throwable t) {
                closed.completeExceptionally(t);
            } finally {
                m.running = false;
            }
        });
        closed.get(60, TimeUnit.SECONDS);
        m.thread.join(10000);
        return "closed";
    }

    // -- the Admin client ------------------------------------------------------------------

    static Object admin(JsonNode cmd) throws Exception {
        try (Admin admin = admin(cmd, p -> p)) {
            String call = cmd.path("call").asText();
            List<String> groups = strings(cmd.path("groups"));
            String group = cmd.path("group").asText();
            switch (call) {
                case "list_groups": {
                    ListGroupsOptions options = cmd.path("consumer_only").asBoolean() ? ListGroupsOptions.forConsumerGroups() : new ListGroupsOptions();
                    if (cmd.has("states")) {
                        Set<GroupState> states = new HashSet<>();
                        for (String s : strings(cmd.path("states"))) states.add(GroupState.parse(s));
                        options.inGroupStates(states);
                    }
                    if (cmd.has("types")) {
                        Set<GroupType> types = new HashSet<>();
                        for (String s : strings(cmd.path("types"))) types.add(GroupType.parse(s));
                        options.withTypes(types);
                    }
                    return settle(admin.listGroups(options).all(), ClientDriver::listings);
                }
                case "list_consumer_groups": {
                    return settle(admin.listConsumerGroups().all(), all -> {
                        List<Object> out = new ArrayList<>();
                        for (var l : all) {
                            Map<String, Object> v = new LinkedHashMap<>();
                            v.put("group", l.groupId());
                            v.put("simple", l.isSimpleConsumerGroup());
                            v.put("state", l.groupState().map(Object::toString).orElse(null));
                            v.put("type", l.type().map(Object::toString).orElse(null));
                            out.add(v);
                        }
                        out.sort((a, b) -> String.valueOf(a).compareTo(String.valueOf(b)));
                        return out;
                    });
                }
                case "describe_consumer_groups": {
                    Map<String, Object> out = new TreeMap<>();
                    admin.describeConsumerGroups(groups).describedGroups().forEach((g, f) -> out.put(g, settle(f, ClientDriver::describe)));
                    return out;
                }
                case "list_offsets":
                    return settle(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata(), ClientDriver::offsetsMap);
                case "alter_offsets": {
                    Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                    cmd.path("offsets").fields().forEachRemaining(e -> offsets.put(tp(e.getKey()), new OffsetAndMetadata(e.getValue().asLong())));
                    var result = admin.alterConsumerGroupOffsets(group, offsets);
                    Map<String, Object> out = new TreeMap<>();
                    out.put("all", settle(result.all(), v -> "ok"));
                    for (TopicPartition t : offsets.keySet()) out.put(tpName(t), settle(result.partitionResult(t), v -> "ok"));
                    return out;
                }
                case "delete_offsets": {
                    Set<TopicPartition> tps = new HashSet<>();
                    for (String t : strings(cmd.path("partitions"))) tps.add(tp(t));
                    DeleteConsumerGroupOffsetsResult result = admin.deleteConsumerGroupOffsets(group, tps);
                    Map<String, Object> out = new TreeMap<>();
                    out.put("all", settle(result.all(), v -> "ok"));
                    for (TopicPartition t : tps) out.put(tpName(t), settle(result.partitionResult(t), v -> "ok"));
                    return out;
                }
                case "delete_groups": {
                    Map<String, Object> out = new TreeMap<>();
                    admin.deleteConsumerGroups(groups).deletedGroups().forEach((g, f) -> out.put(g, settle(f, v -> "ok")));
                    return out;
                }
                case "remove_members": {
                    RemoveMembersFromConsumerGroupOptions options;
                    List<MemberToRemove> members = new ArrayList<>();
                    for (String i : strings(cmd.path("instances"))) members.add(new MemberToRemove(i));
                    options = members.isEmpty() ? new RemoveMembersFromConsumerGroupOptions() : new RemoveMembersFromConsumerGroupOptions(members);
                    RemoveMembersFromConsumerGroupResult result = admin.removeMembersFromConsumerGroup(group, options);
                    Map<String, Object> out = new TreeMap<>();
                    out.put("all", settle(result.all(), v -> "ok"));
                    for (MemberToRemove m : members) out.put(m.groupInstanceId(), settle(result.memberResult(m), v -> "ok"));
                    return out;
                }
                case "describe_transactions": {
                    Map<String, Object> out = new TreeMap<>();
                    var result = admin.describeTransactions(strings(cmd.path("ids")));
                    for (String id : strings(cmd.path("ids"))) out.put(id, settle(result.description(id), ClientDriver::transaction));
                    return out;
                }
                case "list_transactions": {
                    ListTransactionsOptions options = new ListTransactionsOptions();
                    if (cmd.has("states")) {
                        List<org.apache.kafka.clients.admin.TransactionState> states = new ArrayList<>();
                        for (String s : strings(cmd.path("states"))) states.add(org.apache.kafka.clients.admin.TransactionState.parse(s));
                        options.filterStates(states);
                    }
                    if (cmd.has("pattern")) options.filterOnTransactionalIdPattern(cmd.path("pattern").asText());
                    return settle(admin.listTransactions(options).all(), all -> {
                        List<Object> out = new ArrayList<>();
                        for (TransactionListing l : all) {
                            Map<String, Object> v = new LinkedHashMap<>();
                            v.put("transactional_id", l.transactionalId());
                            v.put("state", l.state().toString());
                            out.add(v);
                        }
                        out.sort((a, b) -> String.valueOf(a).compareTo(String.valueOf(b)));
                        return out;
                    });
                }
                case "fence_producers": {
                    Map<String, Object> out = new TreeMap<>();
                    var result = admin.fenceProducers(strings(cmd.path("ids")));
                    for (String id : strings(cmd.path("ids"))) out.put(id, settle(result.epochId(id), v -> (Object) v));
                    return out;
                }
                case "describe_producers": {
                    List<TopicPartition> tps = new ArrayList<>();
                    for (String t : strings(cmd.path("partitions"))) tps.add(tp(t));
                    var result = admin.describeProducers(tps);
                    Map<String, Object> out = new TreeMap<>();
                    for (TopicPartition t : tps) {
                        out.put(tpName(t), settle(result.partitionResult(t), d -> {
                            List<Object> producers = new ArrayList<>();
                            for (var p : d.activeProducers()) {
                                Map<String, Object> v = new LinkedHashMap<>();
                                v.put("epoch", p.producerEpoch());
                                v.put("last_sequence", p.lastSequence());
                                v.put("coordinator_epoch", p.coordinatorEpoch().isPresent() ? p.coordinatorEpoch().getAsInt() : null);
                                v.put("txn_start_offset", p.currentTransactionStartOffset().isPresent() ? p.currentTransactionStartOffset().getAsLong() : null);
                                producers.add(v);
                            }
                            return producers;
                        }));
                    }
                    return out;
                }
                case "create_topic": {
                    String topic = cmd.path("topic").asText();
                    NewTopic t;
                    if (cmd.has("assignments")) {
                        Map<Integer, List<Integer>> assignments = new TreeMap<>();
                        cmd.path("assignments").fields().forEachRemaining(e -> {
                            List<Integer> ids = new ArrayList<>();
                            e.getValue().forEach(n -> ids.add(n.asInt()));
                            assignments.put(Integer.parseInt(e.getKey()), ids);
                        });
                        t = new NewTopic(topic, assignments);
                    } else {
                        t = new NewTopic(topic, java.util.Optional.of(cmd.path("partitions").asInt()), java.util.Optional.of((short) cmd.path("rf").asInt()));
                    }
                    return settle(admin.createTopics(List.of(t)).all(), v -> "ok");
                }
                case "describe_topics": {
                    Map<String, Object> out = new TreeMap<>();
                    admin.describeTopics(strings(cmd.path("topics"))).topicNameValues().forEach((name, f) -> out.put(name, settle(f, d -> {
                        List<Object> parts = new ArrayList<>();
                        for (var p : d.partitions()) {
                            Map<String, Object> v = new LinkedHashMap<>();
                            v.put("partition", p.partition());
                            v.put("leader", p.leader() == null || p.leader().isEmpty() ? null : p.leader().id());
                            v.put("replicas", p.replicas().stream().map(org.apache.kafka.common.Node::id).toList());
                            v.put("isr", p.isr().stream().map(org.apache.kafka.common.Node::id).toList());
                            v.put("elr", p.elr() == null ? null : p.elr().stream().map(org.apache.kafka.common.Node::id).toList());
                            v.put("last_known_elr", p.lastKnownElr() == null ? null : p.lastKnownElr().stream().map(org.apache.kafka.common.Node::id).toList());
                            v.put("racks", p.replicas().stream().map(n -> String.valueOf(n.rack())).toList());
                            parts.add(v);
                        }
                        return parts;
                    })));
                    return out;
                }
                case "describe_cluster": {
                    var options = new org.apache.kafka.clients.admin.DescribeClusterOptions().includeFencedBrokers(cmd.path("include_fenced").asBoolean(false));
                    var result = admin.describeCluster(options);
                    Map<String, Object> out = new LinkedHashMap<>();
                    out.put("controller", result.controller().get(60, TimeUnit.SECONDS).id());
                    List<Object> nodes = new ArrayList<>();
                    for (var n : result.nodes().get(60, TimeUnit.SECONDS)) {
                        Map<String, Object> v = new LinkedHashMap<>();
                        v.put("id", n.id());
                        v.put("rack", n.rack());
                        v.put("fenced", n.isFenced());
                        nodes.add(v);
                    }
                    nodes.sort((a, b) -> String.valueOf(a).compareTo(String.valueOf(b)));
                    out.put("nodes", nodes);
                    return out;
                }
                default:
                    throw new IllegalArgumentException("unknown admin call " + call);
            }
        }
    }

    static Object listings(Collection<GroupListing> all) {
        List<Object> out = new ArrayList<>();
        for (GroupListing l : all) {
            Map<String, Object> v = new LinkedHashMap<>();
            v.put("group", l.groupId());
            v.put("type", l.type().map(Object::toString).orElse(null));
            v.put("protocol", l.protocol());
            v.put("state", l.groupState().map(Object::toString).orElse(null));
            v.put("simple", l.isSimpleConsumerGroup());
            out.add(v);
        }
        out.sort((a, b) -> String.valueOf(a).compareTo(String.valueOf(b)));
        return out;
    }

    static Object transaction(TransactionDescription d) {
        Map<String, Object> v = new LinkedHashMap<>();
        v.put("coordinator", d.coordinatorId());
        v.put("state", d.state().toString());
        v.put("producer_id", d.producerId());
        v.put("producer_epoch", d.producerEpoch());
        v.put("timeout_ms", d.transactionTimeoutMs());
        v.put("started", d.transactionStartTimeMs().isPresent());
        v.put("partitions", tpNames(d.topicPartitions()));
        return v;
    }

    static Object describe(ConsumerGroupDescription d) {
        Map<String, Object> v = new LinkedHashMap<>();
        v.put("group", d.groupId());
        v.put("simple", d.isSimpleConsumerGroup());
        v.put("type", String.valueOf(d.type()));
        v.put("state", String.valueOf(d.groupState()));
        v.put("assignor", d.partitionAssignor());
        v.put("coordinator", d.coordinator() == null ? null : d.coordinator().id());
        v.put("group_epoch", d.groupEpoch().orElse(null));
        v.put("target_assignment_epoch", d.targetAssignmentEpoch().orElse(null));
        v.put("authorized_operations", d.authorizedOperations() == null ? null : new java.util.TreeSet<>(d.authorizedOperations().stream().map(Object::toString).toList()));
        List<Object> members = new ArrayList<>();
        for (MemberDescription m : d.members()) {
            Map<String, Object> mv = new LinkedHashMap<>();
            mv.put("client_id", m.clientId());
            mv.put("instance_id", m.groupInstanceId().orElse(null));
            mv.put("member_id", m.consumerId());
            mv.put("host", m.host());
            mv.put("assignment", tpNames(m.assignment().topicPartitions()));
            mv.put("target_assignment", m.targetAssignment().map(a -> (Object) tpNames(a.topicPartitions())).orElse(null));
            mv.put("member_epoch", m.memberEpoch().orElse(null));
            mv.put("upgraded", m.upgraded().orElse(null));
            members.add(mv);
        }
        members.sort((a, b) -> String.valueOf(((Map<?, ?>) a).get("client_id")).compareTo(String.valueOf(((Map<?, ?>) b).get("client_id"))));
        v.put("members", members);
        return v;
    }

    // -- kafka-consumer-groups -------------------------------------------------------------

    /** ConsumerGroupCommand.main(args) in this JVM: its stdout, stderr and exit status. */
    static Object tool(JsonNode cmd) {
        ByteArrayOutputStream out = new ByteArrayOutputStream(), err = new ByteArrayOutputStream();
        TOOL_OUT.set(out);
        TOOL_ERR.set(err);
        int status = 0;
        try {
            ConsumerGroupCommand.main(strings(cmd.path("args")).toArray(new String[0]));
        } catch (ExitCalled e) {
            status = e.status;
        } finally {
            TOOL_OUT.remove();
            TOOL_ERR.remove();
        }
        Map<String, Object> v = new LinkedHashMap<>();
        v.put("stdout", out.toString(StandardCharsets.UTF_8));
        v.put("stderr", err.toString(StandardCharsets.UTF_8));
        v.put("exit", status);
        return v;
    }
}
