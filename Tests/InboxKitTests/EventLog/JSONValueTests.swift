import Foundation
import TestSupport
import Testing

@testable import InboxKit

/// The log's reader: the fast path for the lines the log writes reads each as `JSONDecoder` does, and leaves every
/// other line to it (ARCHITECTURE.md, "Start-up and memory").
@Suite struct JSONValueTests {
    static let lines = [
        #"{"seq":1,"time":"2026-12-01T06:44:13.194Z","event":"arrived","path":"Documents/Inbox/a b.pdf","size":17}"#,
        #"{"seq":2,"time":"t","event":"moved","ok":true,"no":false,"gone":null,"n":-42,"z":0,"m":-0}"#,
        #"{"seq":3,"time":"t","event":"x","name":"Ångström résumé.txt","big":9223372036854775807}"#,
        #"{}"#,
        // Left to JSONDecoder: escapes, fractions, exponents, nesting, white space, big or odd numbers, duplicates.
        #"{"seq":4,"time":"t","event":"x","path":"a\"b\\c\nd\u00e9"}"#,
        #"{"seq":5,"time":"t","event":"x","ratio":1.5,"e":1e3,"one":1.0}"#,
        #"{"seq":6,"time":"t","event":"x","list":[1,"a/b",null],"object":{"b":1,"a":2}}"#,
        #"{ "seq": 7, "time": "t", "event": "x" }"#,
        #"{"seq":8,"time":"t","event":"x","huge":12345678901234567890,"leading":01}"#,
        #"{"seq":9,"time":"t","event":"x","seq":10}"#,
        // Not JSON at all, or not an object: nil either way.
        #"{"seq":11,"time":"t","event":"x""#, #"{"seq":12,}"#, #"[1,2]"#, #"{"a":tru}"#, #"{"a":-}"#,
        "{\"a\":\"tab\u{09}inside\"}", "", "{\"a\":\"\u{7F}\"} trailing",
    ]

    @Test func theFastPathReadsWhatJSONDecoderReads() throws {
        var fast = 0
        for line in Self.lines {
            let bytes = Array(line.utf8)[...]
            let decoded = try? JSONDecoder().decode([String: JSONValue].self, from: Data(bytes))
            guard let read = JSONValue.flatObject(bytes) else { continue }
            fast += 1
            #expect(read == decoded, "\(line)")
        }
        #expect(fast == 4, "the first four lines take the fast path")
    }

    @Test func everyLineReadsAsBeforeWhicheverPathItTakes() throws {
        let record = try #require(EventLog.parseRecord(Array(Self.lines[0].utf8)[...]))
        #expect(record.seq == 1 && record.event == "arrived" && record.fields["size"] == "17")
        #expect(record.fields["path"] == "Documents/Inbox/a b.pdf")
        let escaped = try #require(EventLog.parseRecord(Array(Self.lines[4].utf8)[...]))
        #expect(escaped.fields["path"] == "a\"b\\c\ndé")
        let nested = try #require(EventLog.parseRecord(Array(Self.lines[6].utf8)[...]))
        #expect(nested.fields["list"] == #"[1,"a\/b",null]"#)
        #expect(nested.fields["object"] == #"{"a":2,"b":1}"#)
        let flags = try #require(EventLog.parseRecord(Array(Self.lines[1].utf8)[...]))
        #expect(flags.fields["ok"] == "true" && flags.fields["gone"] == "null" && flags.fields["m"] == "0")
        #expect(EventLog.parseRecord(Array(Self.lines[10].utf8)[...]) == nil)
    }
}
