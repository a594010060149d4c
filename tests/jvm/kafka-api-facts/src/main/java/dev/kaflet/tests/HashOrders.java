package dev.kaflet.tests;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.utils.internals.LogContext;
import org.apache.kafka.timeline.SnapshotRegistry;
import org.apache.kafka.timeline.TimelineHashMap;

/**
 * The iteration orders of the two maps behind Kafka's ListGroups answer, for the keys given on
 * stdin, one command a line (words separated by tabs); each "order" prints one line of keys.
 *
 * <pre>
 * table                 a new TimelineHashMap&lt;String, String&gt;(registry, 0), as GroupMetadataManager's groups
 * put KEY               groups.put(KEY, ...)
 * remove KEY            groups.remove(KEY)
 * order                 the keys in groups.values() order
 * chm T1 P1 T2 P2 ...  a new ConcurrentHashMap&lt;TopicPartition, _&gt; filled by computeIfAbsent with
 *                       T1-P1, T2-P2, ... in that order, as CoordinatorRuntime's coordinators;
 *                       prints its keySet() order as TOPIC, PARTITION, TOPIC, PARTITION, ...
 * </pre>
 */
public final class HashOrders {
    private HashOrders() {
    }

    public static void main(String[] args) throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        SnapshotRegistry registry = new SnapshotRegistry(new LogContext());
        TimelineHashMap<String, String> groups = new TimelineHashMap<>(registry, 0);
        StringBuilder out = new StringBuilder();
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            String[] words = line.split("\t", -1);
            switch (words[0]) {
                case "table":
                    groups = new TimelineHashMap<>(registry, 0);
                    break;
                case "put":
                    groups.put(words[1], words[1]);
                    break;
                case "remove":
                    groups.remove(words[1]);
                    break;
                case "order":
                    out.append(String.join("\t", groups.values())).append('\n');
                    break;
                case "chm":
                    ConcurrentHashMap<TopicPartition, Boolean> coordinators = new ConcurrentHashMap<>();
                    for (int i = 1; i + 1 < words.length; i += 2) {
                        coordinators.computeIfAbsent(new TopicPartition(words[i], Integer.parseInt(words[i + 1])), tp -> true);
                    }
                    List<String> partitions = new ArrayList<>();
                    for (TopicPartition tp : coordinators.keySet()) {
                        partitions.add(tp.topic());
                        partitions.add(Integer.toString(tp.partition()));
                    }
                    out.append(String.join("\t", partitions)).append('\n');
                    break;
                default:
                    throw new IllegalArgumentException("unknown command: " + line);
            }
        }
        System.out.print(out);
    }
}
