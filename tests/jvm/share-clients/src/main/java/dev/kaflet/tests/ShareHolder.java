package dev.kaflet.tests;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * A share consumer to be killed (ShareScenarios' killed_consumer): args bootstrap, group, topic.
 * In explicit mode it polls until records come, accepts the first half and commits that, prints
 * one JSON line {"accepted": [...], "held": [...]} and then holds the rest without ever polling or
 * acknowledging again, until its process is killed.
 */
public final class ShareHolder {
    private ShareHolder() {}

    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        p.put("group.id", args[1]);
        p.put("share.acknowledgement.mode", "explicit");
        KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(p, new StringDeserializer(), new StringDeserializer());
        c.subscribe(List.of(args[2]));
        List<ConsumerRecord<String, String>> got = new ArrayList<>();
        while (got.isEmpty()) {
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) got.add(r);
        }
        List<Long> accepted = new ArrayList<>();
        List<Long> held = new ArrayList<>();
        for (int i = 0; i < got.size(); i++) {
            if (i < got.size() / 2) {
                c.acknowledge(got.get(i), AcknowledgeType.ACCEPT);
                accepted.add(got.get(i).offset());
            } else {
                held.add(got.get(i).offset());
            }
        }
        boolean ok = c.commitSync().values().stream().allMatch(e -> e.isEmpty());
        System.out.println("{\"accepted\": " + (ok ? accepted : "\"failed\"") + ", \"held\": " + held + "}");
        System.out.flush();
        while (true) {
            Thread.sleep(1000);  // holds the records; the consumer is never closed
        }
    }
}
