import java.time.Duration;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;

public class QuickStart {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args.length > 0 ? args[0] : "127.0.0.1:9092");
        props.put("key.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        props.put("value.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        try (var producer = new KafkaProducer<String, String>(props)) {
            producer.send(new ProducerRecord<>("greetings", "hello")).get();
        }
        props.put("group.id", "readers");
        props.put("auto.offset.reset", "earliest");
        props.put("enable.auto.commit", "false");
        props.put("key.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
        props.put("value.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
        try (var consumer = new KafkaConsumer<String, String>(props)) {
            consumer.subscribe(List.of("greetings"));
            ConsumerRecords<String, String> records = ConsumerRecords.empty();
            while (records.isEmpty()) records = consumer.poll(Duration.ofSeconds(1));
            records.forEach(r -> System.out.println(r.value()));
            consumer.commitSync();
        }
    }
}
