package dev.kaflet.tests;

import org.apache.kafka.common.protocol.ApiKeys;

/**
 * One JSON line per API Kafka's clients library knows: its key and name, its oldest and latest
 * (stable) versions, the flexible ones (request header v2) and the deprecated ones.
 */
public final class ApiFacts {
    private ApiFacts() {
    }

    public static void main(String[] args) {
        for (ApiKeys key : ApiKeys.values()) {
            StringBuilder flexible = new StringBuilder();
            StringBuilder deprecated = new StringBuilder();
            short latest = key.latestVersion(true);
            for (short v = key.oldestVersion(); v <= latest; v++) {
                if (key.requestHeaderVersion(v) >= 2) {
                    flexible.append(flexible.length() == 0 ? "" : ",").append(v);
                }
                if (key.isVersionDeprecated(v)) {
                    deprecated.append(deprecated.length() == 0 ? "" : ",").append(v);
                }
            }
            System.out.println("{\"key\": " + key.id + ", \"name\": \"" + key.name + "\", \"oldest\": " + key.oldestVersion()
                + ", \"latest\": " + key.latestVersion(false) + ", \"latest_unstable\": " + latest
                + ", \"flexible\": [" + flexible + "], \"deprecated\": [" + deprecated + "]}");
        }
    }
}
