package dev.kaflet.tests;

import java.io.FileReader;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.UUID;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Each argument is NAME=PROPERTIES_FILE: the client properties (bootstrap.servers, security.protocol,
 * sasl.mechanism, sasl.jaas.config, ssl.truststore.*) of one scenario. For each, one record is
 * produced to a topic of its own and consumed back by a group; one line per scenario is printed:
 * "NAME OK" or "NAME FAIL reason". Exit status 0 when all are OK.
 */
public final class SecureClients {
    public static void main(String[] args) throws Exception {
        int failed = 0;
        for (String arg : args) {
            int eq = arg.indexOf('=');
            String name = arg.substring(0, eq);
            Properties props = new Properties();
            try (FileReader reader = new FileReader(arg.substring(eq + 1))) {
                props.load(reader);
            }
            try {
                roundtrip(name, props);
                System.out.println(name + " OK");
            } catch (Exception e) {
                failed++;
                Throwable root = e;
                while (root.getCause() != null) {
                    root = root.getCause();
                }
                System.out.println(name + " FAIL " + e + " (cause: " + root + ")");
            }
            System.out.flush();
        }
        System.exit(failed == 0 ? 0 : 1);
    }

    private static void roundtrip(String name, Properties base) throws Exception {
        String topic = "java-" + name.toLowerCase().replaceAll("[^a-z0-9]", "-");
        String value = UUID.randomUUID().toString();
        Properties p = new Properties();
        p.putAll(base);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        p.put("delivery.timeout.ms", "30000");
        p.put("request.timeout.ms", "20000");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            producer.send(new ProducerRecord<>(topic, "k", value)).get();
        }
        Properties c = new Properties();
        c.putAll(base);
        c.put("key.deserializer", StringDeserializer.class.getName());
        c.put("value.deserializer", StringDeserializer.class.getName());
        c.put("group.id", "g-" + topic);
        c.put("auto.offset.reset", "earliest");
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c)) {
            consumer.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 30000;
            while (System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    if (value.equals(r.value())) {
                        consumer.commitSync();
                        return;
                    }
                }
            }
        }
        throw new IllegalStateException("the record produced was not consumed within 30 s");
    }
}
