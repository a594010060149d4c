package dev.kaflet.streams;

import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Joined;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.WindowStore;

/**
 * The three applications, each a sub-topology set of one {@link StreamsBuilder}. Inputs are shared
 * by every application of a run (topic names from {@code in}); outputs are the application's own
 * ({@code out} is the prefix). Every value written is a string, so that the suite reads them as
 * text: counts in decimal, join results as {@code click:region}.
 */
final class Topologies {
  private static final Serde<String> S = Serdes.String();

  private Topologies() {}

  /** Word count: lines split into words, re-keyed by word (a repartition topic), counted in a
   * store with a changelog; every update of a count goes to {@code OUT-wc-output}. */
  static void wordCount(StreamsBuilder builder, String in, String out) {
    builder.stream(in + "-wc-input", Consumed.with(S, S))
        .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
        .filter((key, word) -> !word.isEmpty())
        .groupBy((key, word) -> word, Grouped.with("wc-words", S, S))
        .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("wc-counts")
            .withKeySerde(S).withValueSerde(Serdes.Long()))
        .toStream()
        .mapValues(count -> Long.toString(count))
        .to(out + "-wc-output", Produced.with(S, S));
  }

  /** Stream-table join: clicks (key click id, value user) re-keyed by user (a repartition topic
   * co-partitioned with the users table, whose store has a changelog) and joined with the user's
   * region: {@code OUT-join-output} gets (user, "click:region"). */
  static void join(StreamsBuilder builder, String in, String out) {
    KTable<String, String> users = builder.table(in + "-join-users", Consumed.with(S, S),
        Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("join-users-store")
            .withKeySerde(S).withValueSerde(S));
    builder.stream(in + "-join-clicks", Consumed.with(S, S))
        .map((click, user) -> KeyValue.pair(user, click))
        .join(users, (click, region) -> click + ":" + region, Joined.with(S, S, S, "join-clicks-by-user"))
        .to(out + "-join-output", Produced.with(S, S));
  }

  /** Windowed count: events counted per key in 10 s tumbling windows of event time (a grace of a
   * day, so that no event of a run is late); {@code OUT-win-output} gets ("key@windowStart", count). */
  static void windowed(StreamsBuilder builder, String in, String out) {
    builder.stream(in + "-win-input", Consumed.with(S, S))
        .groupByKey(Grouped.with(S, S))
        .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofSeconds(10), Duration.ofDays(1)))
        .count(Materialized.<String, Long, WindowStore<Bytes, byte[]>>as("win-counts")
            .withKeySerde(S).withValueSerde(Serdes.Long()))
        .toStream()
        .map((window, count) -> KeyValue.pair(window.key() + "@" + window.window().start(), Long.toString(count)))
        .to(out + "-win-output", Produced.with(S, S));
  }

  static void add(StreamsBuilder builder, String name, String in, String out) {
    switch (name) {
      case "wordcount" -> wordCount(builder, in, out);
      case "join" -> join(builder, in, out);
      case "windowed" -> windowed(builder, in, out);
      default -> throw new IllegalArgumentException("unknown topology " + name + " (wordcount, join, windowed)");
    }
  }
}
