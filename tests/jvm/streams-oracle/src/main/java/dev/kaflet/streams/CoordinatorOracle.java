package dev.kaflet.streams;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

import org.apache.kafka.coordinator.group.api.streams.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.streams.assignor.TopologyDescriber;
import org.apache.kafka.coordinator.group.streams.CurrentAssignmentBuilder;
import org.apache.kafka.coordinator.group.streams.MemberState;
import org.apache.kafka.coordinator.group.streams.StreamsGroupMember;
import org.apache.kafka.coordinator.group.streams.TasksTuple;
import org.apache.kafka.coordinator.group.streams.TasksTupleWithEpochs;
import org.apache.kafka.coordinator.group.streams.assignor.AssignmentConfigsImpl;
import org.apache.kafka.coordinator.group.streams.assignor.GroupSpecImpl;
import org.apache.kafka.coordinator.group.streams.assignor.MemberMetadataAndStateImpl;
import org.apache.kafka.coordinator.group.streams.assignor.StickyTaskAssignor;

/**
 * Answers, one line per input line, what Kafka 4.4's StickyTaskAssignor and streams
 * CurrentAssignmentBuilder compute for a case. Input lines:
 *
 *   assign STANDBYS MEMBERS SUBTOPOLOGIES
 *     MEMBERS: id:process:active:standby:offsets,...  (tasks "sub-p;...", offsets "sub-p-offset;...")
 *     SUBTOPOLOGIES: id:tasks:stateful(0|1),...
 *     answer: id=active|standby;id=active|standby... (members sorted, tasks sorted)
 *
 *   reconcile EPOCH PREV STATE PROCESS|ACTIVE@|STANDBY|WARMUP|P_ACTIVE@|P_STANDBY|P_WARMUP|TARGET_EPOCH|T_ACTIVE|T_STANDBY|T_WARMUP|OWNED|ACTIVE_PROCS|STANDBY_PROCS|WARMUP_PROCS
 *     ACTIVE@: "sub-p@epoch;..."; OWNED: "null" or "active/standby/warmup"; *_PROCS: "sub-p=proc+proc;..."; "-" for empty
 *     answer: EPOCH PREV STATE|ACTIVE@|STANDBY|WARMUP|P_ACTIVE@|P_STANDBY|P_WARMUP, or "ERR ExceptionName"
 */
public final class CoordinatorOracle {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String answer;
            try {
                if (line.startsWith("assign ")) {
                    answer = assign(line.substring(7).split(" "));
                } else if (line.startsWith("reconcile ")) {
                    answer = reconcile(line.substring(10));
                } else {
                    answer = "ERR unknown request";
                }
            } catch (Exception e) {
                answer = "ERR " + e.getClass().getSimpleName();
            }
            System.out.println(answer);
            System.out.flush();
        }
    }

    private static String assign(String[] a) {
        int standby = Integer.parseInt(a[0]);
        Map<String, MemberMetadataAndStateImpl> members = new HashMap<>();
        for (String m : a[1].split(",")) {
            String[] f = m.split(":", -1);
            members.put(f[0], new MemberMetadataAndStateImpl(Optional.empty(), Optional.empty(), f[1], Map.of(),
                tasks(f[2]), tasks(f[3]), Map.of(), offsets(f.length > 4 ? f[4] : ""), Map.of()));
        }
        TreeMap<String, Integer> subs = new TreeMap<>();
        Set<String> stateful = new HashSet<>();
        for (String s : a[2].split(",")) {
            String[] f = s.split(":");
            subs.put(f[0], Integer.parseInt(f[1]));
            if (f[2].equals("1")) {
                stateful.add(f[0]);
            }
        }
        TopologyDescriber describer = new TopologyDescriber() {
            public List<String> subtopologies() {
                return new ArrayList<>(subs.keySet());
            }

            public int maxNumInputPartitions(String s) {
                return subs.get(s);
            }

            public boolean isStateful(String s) {
                return stateful.contains(s);
            }
        };
        GroupAssignment result = new StickyTaskAssignor().assign(new GroupSpecImpl(members, new AssignmentConfigsImpl(standby, List.of())), describer);
        TreeMap<String, String> out = new TreeMap<>();
        result.members().forEach((id, ma) -> out.put(id, fmt(ma.activeTasks()) + "|" + fmt(ma.standbyTasks())));
        List<String> parts = new ArrayList<>();
        out.forEach((k, v) -> parts.add(k + "=" + v));
        return String.join(";;", parts);
    }

    private static String reconcile(String line) {
        String[] f = line.split("\\|", -1);
        String[] h = f[0].trim().split(" ");
        StreamsGroupMember member = StreamsGroupMember.Builder.withDefaults("m")
            .setMemberEpoch(Integer.parseInt(h[0]))
            .setPreviousMemberEpoch(Integer.parseInt(h[1]))
            .setState(MemberState.fromValue(Byte.parseByte(h[2])))
            .setProcessId(h[3])
            .setAssignedTasks(new TasksTupleWithEpochs(withEpochs(f[1]), tasks(f[2]), tasks(f[3])))
            .setTasksPendingRevocation(new TasksTupleWithEpochs(withEpochs(f[4]), tasks(f[5]), tasks(f[6])))
            .build();
        TasksTuple target = new TasksTuple(tasks(f[8]), tasks(f[9]), tasks(f[10]));
        String owned = f[11].trim();
        TasksTuple ownedTasks = owned.equals("null") ? null : new TasksTuple(tasks(owned.split("/")[0]), tasks(owned.split("/")[1]), tasks(owned.split("/")[2]));
        Map<String, Set<String>> active = processes(f[12]);
        Map<String, Set<String>> standby = processes(f[13]);
        Map<String, Set<String>> warmup = processes(f[14]);
        StreamsGroupMember r = new CurrentAssignmentBuilder(member)
            .withTargetAssignment(Integer.parseInt(f[7].trim()), target)
            .withCurrentActiveTaskProcessId((s, p) -> {
                Set<String> x = active.get(s + "-" + p);
                return x == null ? null : x.iterator().next();
            })
            .withCurrentStandbyTaskProcessIds((s, p) -> standby.getOrDefault(s + "-" + p, Set.of()))
            .withCurrentWarmupTaskProcessIds((s, p) -> warmup.getOrDefault(s + "-" + p, Set.of()))
            .withOwnedAssignment(ownedTasks)
            .build();
        return r.memberEpoch() + " " + r.previousMemberEpoch() + " " + r.state().value()
            + "|" + fmtEpochs(r.assignedTasks().activeTasksWithEpochs()) + "|" + fmt(r.assignedTasks().standbyTasks()) + "|" + fmt(r.assignedTasks().warmupTasks())
            + "|" + fmtEpochs(r.tasksPendingRevocation().activeTasksWithEpochs()) + "|" + fmt(r.tasksPendingRevocation().standbyTasks())
            + "|" + fmt(r.tasksPendingRevocation().warmupTasks());
    }

    private static Map<String, Set<Integer>> tasks(String s) {
        Map<String, Set<Integer>> r = new HashMap<>();
        s = s.trim();
        if (s.isEmpty() || s.equals("-")) {
            return r;
        }
        for (String t : s.split(";")) {
            String[] f = t.split("-");
            r.computeIfAbsent(f[0], k -> new HashSet<>()).add(Integer.parseInt(f[1]));
        }
        return r;
    }

    private static Map<String, Map<Integer, Integer>> withEpochs(String s) {
        Map<String, Map<Integer, Integer>> r = new HashMap<>();
        s = s.trim();
        if (s.isEmpty() || s.equals("-")) {
            return r;
        }
        for (String t : s.split(";")) {
            String[] f = t.split("[-@]");
            r.computeIfAbsent(f[0], k -> new HashMap<>()).put(Integer.parseInt(f[1]), Integer.parseInt(f[2]));
        }
        return r;
    }

    private static Map<String, Map<Integer, Long>> offsets(String s) {
        Map<String, Map<Integer, Long>> r = new HashMap<>();
        if (s.isEmpty()) {
            return r;
        }
        for (String t : s.split(";")) {
            String[] f = t.split("-");
            r.computeIfAbsent(f[0], k -> new HashMap<>()).put(Integer.parseInt(f[1]), Long.parseLong(f[2]));
        }
        return r;
    }

    private static Map<String, Set<String>> processes(String s) {
        Map<String, Set<String>> r = new HashMap<>();
        s = s.trim();
        if (s.isEmpty() || s.equals("-")) {
            return r;
        }
        for (String t : s.split(";")) {
            String[] f = t.split("=");
            r.put(f[0], new HashSet<>(Arrays.asList(f[1].split("\\+"))));
        }
        return r;
    }

    private static String fmt(Map<String, Set<Integer>> m) {
        List<String> l = new ArrayList<>();
        new TreeMap<>(m).forEach((k, v) -> new TreeSet<>(v).forEach(p -> l.add(k + "-" + p)));
        return l.isEmpty() ? "-" : String.join(";", l);
    }

    private static String fmtEpochs(Map<String, Map<Integer, Integer>> m) {
        List<String> l = new ArrayList<>();
        new TreeMap<>(m).forEach((k, v) -> new TreeMap<>(v).forEach((p, e) -> l.add(k + "-" + p + "@" + e)));
        return l.isEmpty() ? "-" : String.join(";", l);
    }
}
