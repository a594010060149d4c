package dev.kaflet.streams;

import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;

import org.apache.kafka.tools.streams.StreamsGroupCommand;

/**
 * Runs Kafka 4.4's kafka-streams-groups tool (StreamsGroupCommand.execute) once per input line,
 * in this one JVM: a line holds the command's arguments separated by tabs; the answer is what the
 * command printed (its standard output, then its standard error), then a line "@@exit CODE".
 */
public final class ToolBatch {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = System.out;
        PrintStream err = System.err;
        String line;
        while ((line = in.readLine()) != null) {
            ByteArrayOutputStream captured = new ByteArrayOutputStream();
            ByteArrayOutputStream capturedErr = new ByteArrayOutputStream();
            int code;
            System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
            System.setErr(new PrintStream(capturedErr, true, StandardCharsets.UTF_8));
            try {
                code = StreamsGroupCommand.execute(line.split("\t"));
            } catch (Throwable t) {
                t.printStackTrace();
                code = 255;
            } finally {
                System.out.flush();
                System.err.flush();
                System.setOut(out);
                System.setErr(err);
            }
            out.print(captured.toString(StandardCharsets.UTF_8));
            out.print(capturedErr.toString(StandardCharsets.UTF_8));
            out.println();
            out.println("@@exit " + code);
            out.flush();
        }
    }
}
