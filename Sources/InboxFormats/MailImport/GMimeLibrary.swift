import CGMime
import Glibc
import InboxKit

/// GMime, initialised once per process: `g_mime_init` must not run twice at once (ARCHITECTURE.md, "Mail import").
enum GMimeLibrary {
    private static let initialised: Bool = {
        g_mime_init()
        return true
    }()

    /// Initialises GMime on first use; later calls return at once.
    static func ensureInitialised() {
        _ = initialised
    }

    /// A C string from GMime as text (GMime hands over UTF-8; anything else becomes U+FFFD).
    static func text(_ pointer: UnsafePointer<CChar>?) -> String? {
        guard let pointer else { return nil }
        return String(decoding: UnsafeRawPointer(pointer).assumingMemoryBound(to: UInt8.self).bytes(), as: UTF8.self)
    }

    /// A C string from GMime as bytes.
    static func bytes(_ pointer: UnsafePointer<CChar>?) -> [UInt8]? {
        guard let pointer else { return nil }
        return UnsafeRawPointer(pointer).assumingMemoryBound(to: UInt8.self).bytes()
    }
}

extension UnsafePointer where Pointee == UInt8 {
    /// The bytes up to the terminating NUL.
    fileprivate func bytes() -> [UInt8] {
        Array(
            UnsafeBufferPointer(start: self, count: strlen(UnsafeRawPointer(self).assumingMemoryBound(to: CChar.self))))
    }
}

/// One reference to a GObject, released when the owner goes.
final class GObjectReference<Pointee> {
    let pointer: UnsafeMutablePointer<Pointee>

    /// Takes over the reference `pointer` holds (one that GMime's constructors return).
    init(taking pointer: UnsafeMutablePointer<Pointee>) {
        self.pointer = pointer
    }

    deinit {
        g_object_unref(UnsafeMutableRawPointer(pointer))
    }
}
