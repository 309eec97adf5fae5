import InboxKit
import Testing

/// Durations and sizes as the command line takes them (`Quantity`): one unit at most, nothing negative, nothing past
/// `Int64.max`.
@Suite struct QuantityTests {
    @Test func durationsAndSizes() {
        #expect(Quantity.seconds(from: "3600") == 3600)
        #expect(Quantity.seconds(from: "30d") == 2_592_000)
        #expect(Quantity.seconds(from: "12h") == 43_200)
        #expect(Quantity.seconds(from: "10m") == 600)
        #expect(Quantity.seconds(from: "45s") == 45)
        #expect(Quantity.seconds(from: "2w") == 1_209_600)
        for bad in ["", "d", "-5", "3x", "1.5h", "30 d", "+5", "99999999999999999999", "9223372036854775807d"] {
            #expect(Quantity.seconds(from: bad) == nil, "\(bad)")
        }
        #expect(Quantity.bytes(from: "1048576") == 1_048_576)
        #expect(Quantity.bytes(from: "512M") == 512 << 20)
        #expect(Quantity.bytes(from: "1G") == 1 << 30)
        #expect(Quantity.bytes(from: "64k") == 65_536)
        #expect(Quantity.bytes(from: "2TiB") == 2 << 40)
        for bad in ["", "G", "-1", "1.5G", "12X", "10iB", "1GB", "99999999999T"] {
            #expect(Quantity.bytes(from: bad) == nil, "\(bad)")
        }
    }
}
