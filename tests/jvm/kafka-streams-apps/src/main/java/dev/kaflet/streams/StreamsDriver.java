package dev.kaflet.streams;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.state.BuiltInDslStoreSuppliers;

/**
 * One Kafka Streams instance (one JVM) hosting one or more applications, driven by the suite
 * (tests/support/streams_apps.py) over stdin and stdout.
 *
 * <pre>
 * StreamsDriver --bootstrap HOST:PORT --state-dir DIR
 *               --app name=N,id=APPLICATION_ID,guarantee=at_least_once|exactly_once_v2,
 *                     protocol=classic|streams,in=INPUT_PREFIX,out=OUTPUT_PREFIX,
 *                     topologies=wordcount+join+windowed[,store=in_memory|rocksdb][,KEY=VALUE...]
 *               [--app ...] [--set KEY=VALUE ...] [--hold]
 * </pre>
 *
 * Every application is one {@link KafkaStreams} with its own application id (one consumer group),
 * started as soon as all are built; with {@code --hold}, built, then {@code ready} is printed and
 * they start on the command {@code start} (so that several instances start at the same moment). {@code --set} adds a Streams (or client) config to every
 * application, an app's own KEY=VALUE to that one.
 *
 * <p>Out, one JSON object a line: {@code start} (per app, when start() is called), {@code state}
 * (every state change, with the milliseconds since start() and, entering RUNNING, the local active
 * and standby tasks), {@code tasks} (answering the command), {@code error} (an uncaught exception:
 * the app shuts down), {@code closing} and {@code closed}. {@code at} is the wall clock in
 * milliseconds (System.currentTimeMillis), comparable across the instances of one machine. In, one command a line: {@code tasks}, {@code close} or
 * {@code close leave} (close every app, leaving the group or not, then exit 0). End of input
 * halts the JVM at once: the suite that started it is gone.
 */
public final class StreamsDriver {
  private static final Object OUT = new Object();

  private record App(String name, KafkaStreams streams, long[] startNanos) {}

  public static void main(String[] args) throws Exception {
    String bootstrap = null;
    String stateDir = null;
    boolean hold = false;
    List<Map<String, String>> specs = new ArrayList<>();
    Map<String, String> common = new LinkedHashMap<>();
    for (int i = 0; i < args.length; i++) {
      String value = i + 1 < args.length ? args[i + 1] : null;
      switch (args[i]) {
        case "--bootstrap" -> bootstrap = value;
        case "--state-dir" -> stateDir = value;
        case "--app" -> specs.add(pairs(value, ","));
        case "--set" -> common.putAll(pairs(value, "\u0000"));
        case "--hold" -> {
          hold = true;
          i--; // no value
        }
        default -> throw new IllegalArgumentException("unknown argument " + args[i]);
      }
      i++;
    }
    if (bootstrap == null || stateDir == null || specs.isEmpty()) {
      throw new IllegalArgumentException("--bootstrap, --state-dir and at least one --app are required");
    }
    List<App> apps = new ArrayList<>();
    for (Map<String, String> spec : specs) {
      apps.add(build(spec, bootstrap, stateDir, common));
    }
    if (hold) {
      emit("{\"event\":\"ready\"}");
    } else {
      start(apps);
    }
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    String line;
    while ((line = in.readLine()) != null) {
      String command = line.trim();
      if (command.equals("start") && hold) {
        hold = false;
        start(apps);
      } else if (command.equals("tasks")) {
        for (App app : apps) {
          emit("{\"event\":\"tasks\",\"app\":" + q(app.name) + ",\"state\":" + q(app.streams.state().name()) + tasks(app.streams) + "}");
        }
      } else if (command.startsWith("close")) {
        boolean leave = command.endsWith("leave");
        CloseOptions options = CloseOptions.timeout(Duration.ofSeconds(30))
            .withGroupMembershipOperation(leave ? CloseOptions.GroupMembershipOperation.LEAVE_GROUP
                                                : CloseOptions.GroupMembershipOperation.REMAIN_IN_GROUP);
        emit("{\"event\":\"closing\",\"leave\":" + leave + ",\"at\":" + System.currentTimeMillis() + "}");
        for (App app : apps) {
          long t0 = System.nanoTime();
          boolean clean = app.streams.close(options);
          emit("{\"event\":\"closed\",\"app\":" + q(app.name) + ",\"clean\":" + clean + ",\"close_ms\":" + ms(t0) + "}");
        }
        System.out.flush();
        System.exit(0);
      } else if (!command.isEmpty()) {
        emit("{\"event\":\"unknown-command\",\"command\":" + q(command) + "}");
      }
    }
    Runtime.getRuntime().halt(3); // the suite is gone: no orderly shutdown to wait for
  }

  private static void start(List<App> apps) {
    for (App app : apps) {
      emit("{\"event\":\"start\",\"app\":" + q(app.name) + ",\"at\":" + System.currentTimeMillis() + "}");
      app.startNanos[0] = System.nanoTime();
      app.streams.start();
    }
  }

  private static App build(Map<String, String> spec, String bootstrap, String stateDir, Map<String, String> common) {
    Map<String, String> own = new LinkedHashMap<>(spec);
    String name = own.remove("name");
    String id = own.remove("id");
    String in = own.remove("in");
    String out = own.remove("out");
    String topologies = own.remove("topologies");
    String guarantee = own.remove("guarantee");
    String protocol = own.remove("protocol");
    String store = own.remove("store");
    if (name == null || id == null || in == null || out == null || topologies == null || guarantee == null || protocol == null) {
      throw new IllegalArgumentException("--app needs name, id, in, out, topologies, guarantee and protocol: " + spec);
    }
    StreamsBuilder builder = new StreamsBuilder();
    for (String topology : topologies.split("\\+")) {
      Topologies.add(builder, topology, in, out);
    }
    Properties props = new Properties();
    props.put(StreamsConfig.APPLICATION_ID_CONFIG, id);
    props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
    props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, guarantee);
    props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, protocol);
    props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
    props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
    // Every update of a store reaches the output, so that outputs can be checked record by record.
    props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
    if ("in_memory".equals(store)) {
      props.put(StreamsConfig.DSL_STORE_SUPPLIERS_CLASS_CONFIG, BuiltInDslStoreSuppliers.InMemoryDslStoreSuppliers.class);
    } else if (store != null && !store.equals("rocksdb")) {
      throw new IllegalArgumentException("store is in_memory or rocksdb, not " + store);
    }
    props.putAll(common);
    props.putAll(own);
    KafkaStreams streams = new KafkaStreams(builder.build(props), props);
    long[] startNanos = {0};
    streams.setStateListener((now, before) -> {
      String tasks = now == KafkaStreams.State.RUNNING ? tasks(streams) : "";
      emit("{\"event\":\"state\",\"app\":" + q(name) + ",\"from\":" + q(before.name()) + ",\"to\":" + q(now.name())
          + ",\"ms\":" + ms(startNanos[0]) + ",\"at\":" + System.currentTimeMillis() + tasks + "}");
    });
    streams.setUncaughtExceptionHandler(exception -> {
      StringWriter trace = new StringWriter();
      exception.printStackTrace(new PrintWriter(trace));
      emit("{\"event\":\"error\",\"app\":" + q(name) + ",\"error\":" + q(trace.toString()) + "}");
      return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
    });
    return new App(name, streams, startNanos);
  }

  /** The local tasks as JSON members: ,"active":[...],"standby":[...] (sorted task ids). */
  private static String tasks(KafkaStreams streams) {
    TreeSet<String> active = new TreeSet<>();
    TreeSet<String> standby = new TreeSet<>();
    for (ThreadMetadata thread : streams.metadataForLocalThreads()) {
      for (TaskMetadata task : thread.activeTasks()) {
        active.add(task.taskId().toString());
      }
      for (TaskMetadata task : thread.standbyTasks()) {
        standby.add(task.taskId().toString());
      }
    }
    return ",\"active\":" + list(active) + ",\"standby\":" + list(standby);
  }

  private static Map<String, String> pairs(String text, String separator) {
    if (text == null) {
      throw new IllegalArgumentException("a KEY=VALUE list is missing");
    }
    Map<String, String> out = new LinkedHashMap<>();
    for (String pair : text.split(separator)) {
      int eq = pair.indexOf('=');
      if (eq <= 0) {
        throw new IllegalArgumentException("not KEY=VALUE: " + pair);
      }
      out.put(pair.substring(0, eq), pair.substring(eq + 1));
    }
    return out;
  }

  private static double ms(long t0) {
    return Math.round((System.nanoTime() - t0) / 10_000.0) / 100.0;
  }

  private static String list(TreeSet<String> items) {
    StringBuilder sb = new StringBuilder("[");
    for (String item : items) {
      sb.append(sb.length() > 1 ? "," : "").append(q(item));
    }
    return sb.append(']').toString();
  }

  private static String q(String s) {
    StringBuilder sb = new StringBuilder("\"");
    for (char c : s.toCharArray()) {
      switch (c) {
        case '"' -> sb.append("\\\"");
        case '\\' -> sb.append("\\\\");
        case '\n' -> sb.append("\\n");
        case '\r' -> sb.append("\\r");
        case '\t' -> sb.append("\\t");
        default -> {
          if (c < 0x20) {
            sb.append(String.format("\\u%04x", (int) c));
          } else {
            sb.append(c);
          }
        }
      }
    }
    return sb.append('"').toString();
  }

  private static void emit(String json) {
    synchronized (OUT) {
      System.out.println(json);
      System.out.flush();
    }
  }
}
