import Glibc

/// A C library opened on first use, not by the dynamic loader at every start: for one that only some work needs
/// (ARCHITECTURE.md, "Start-up and memory"). `inbox --help` and `inbox move` load neither libnettle nor libmagic.
package struct LazyLibrary {
    /// The library's file name as the loader looks it up, e.g. `libnettle.so.8`.
    package let soname: String
    private let handle: UnsafeMutableRawPointer

    /// Opens `soname`, resolving all its symbols now (`RTLD_NOW`); a second open of one library is cheap.
    package init(_ soname: String) throws(ContainerError) {
        guard let handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL) else {
            throw ContainerError(.failure, "cannot load \(soname): \(Self.lastError())")
        }
        self.soname = soname
        self.handle = handle
    }

    /// Lets the library go: it is unmapped once no other open holds it. Functions taken from it must not be
    /// called after.
    package func close() {
        dlclose(handle)
    }

    /// The function `name` as the C function type `type`, which must be its prototype's.
    package func function<Function>(_ name: String, as type: Function.Type) throws(ContainerError) -> Function {
        guard let address = dlsym(handle, name) else {
            throw ContainerError(.failure, "\(soname) has no '\(name)': \(Self.lastError())")
        }
        return unsafeBitCast(address, to: type)
    }

    private static func lastError() -> String { dlerror().map { String(cString: $0) } ?? "unknown error" }
}
