#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import SnapThumbCore
import SystemKit
import Synchronization

/// A directory below a store's root, opened one component at a time from the
/// root with `O_NOFOLLOW`, and every file in it created, linked, renamed and read
/// relative to that descriptor (`openat`, `linkat`, `renameat`). A symbolic link
/// planted anywhere below the root (`manifests/evil -> /elsewhere`) is refused
/// instead of followed, so SnapThumb never writes outside its store, and a link
/// swapped in after the check cannot redirect a write either. The root itself may
/// be a symlink: it is the operator's choice.
///
/// One owner per descriptor: it is closed when the last reference goes.
final class StoreDirectory: Sendable {
    let fd: Int32
    /// The directory's path, for messages.
    let path: String
    /// Device and inode of the open directory (they never change for an open descriptor),
    /// from one `fstat` when it is opened; nil if that failed.
    let identity: OpenDirectories.FileIdentity?
    /// The file system it is on: a rename between two directories works only within one.
    var device: UInt64? { identity?.device }

    private init(fd: Int32, path: String) {
        self.fd = fd
        self.path = path
        var st = stat()
        self.identity = fstat(fd, &st) == 0 ? OpenDirectories.FileIdentity(device: UInt64(st.st_dev), inode: UInt64(st.st_ino)) : nil
    }

    deinit { close(fd) }

    /// Opens `components` below `root` (creating missing directories when
    /// `create`; each new one made durable by an fsync of its parent unless `sync`
    /// is false). A component that is a symbolic link, or not a directory, is
    /// refused with `unsafe-name`.
    static func open(root: String, _ components: [String], create: Bool, sync: Bool = true) throws -> StoreDirectory {
        guard let directory = try open(root: root, components, create: create, sync: sync, missingIsNil: false) else {
            throw SnapError(.internal, "unreachable: a missing directory below \(root) was not reported")
        }
        return directory
    }

    /// The directory that holds `relativePath` and the file's name, or nil when a
    /// directory on the way does not exist (nothing is created).
    static func existingParent(root: String, of relativePath: String) throws -> (StoreDirectory, String)? {
        var components = PathBytes.segments(relativePath)
        let name = components.removeLast()
        return try open(root: root, components, create: false, sync: false, missingIsNil: true).map { ($0, name) }
    }

    static func open(root: String, _ components: [String], create: Bool, sync: Bool, missingIsNil: Bool) throws -> StoreDirectory? {
        let current = Glibc.open(root.isEmpty ? "." : root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard current >= 0 else { throw SnapError.io("cannot open the store directory", root, errno: errno) }
        return try walk(from: current, owned: true, path: root, components, create: create, sync: sync, missingIsNil: missingIsNil)
    }

    /// `components` below this directory, opened as `open(root:…)` opens them below the root.
    func open(_ components: ArraySlice<String>, create: Bool, sync: Bool, missingIsNil: Bool) throws -> StoreDirectory? {
        if components.isEmpty { return self }
        return try Self.walk(from: fd, owned: false, path: path, components, create: create, sync: sync, missingIsNil: missingIsNil)
    }

    /// Opens `components` one at a time from `start` (closed on the way when `owned`).
    private static func walk(from start: Int32, owned: Bool, path startPath: String, _ components: some Collection<String>,
                             create: Bool, sync: Bool, missingIsNil: Bool) throws -> StoreDirectory? {
        var current = start
        var path = startPath
        // Closes `current` unless it is a descriptor this walk does not own.
        func close(_ descriptor: Int32) { if descriptor != start || owned { _ = Glibc.close(descriptor) } }
        for component in components {
            let parentPath = path
            path += "/" + component
            var next = openat(current, component, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            if next < 0, errno == ENOENT, create {
                if mkdirat(current, component, 0o755) != 0, errno != EEXIST {
                    let code = errno
                    close(current)
                    throw SnapError.io("cannot create directory", path, errno: code)
                }
                if sync, fsync(current) != 0 {
                    let code = errno
                    close(current)
                    throw SnapError.io("cannot fsync directory", parentPath, errno: code)
                }
                next = openat(current, component, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            }
            let code = errno
            if next < 0, code == ENOENT, missingIsNil {
                close(current)
                return nil
            }
            if next < 0 {
                let kind = Self.kind(of: component, in: current)
                close(current)
                switch kind {
                case .some(S_IFLNK):
                    throw SnapError(.unsafeName, "\(path) is a symbolic link inside the store; SnapThumb never writes or reads through one")
                case .some(let mode) where mode != S_IFDIR:
                    throw SnapError(.io, "\(path) exists and is not a directory: it \(StoreBlocked.phrase)")
                default:
                    throw SnapError.io("cannot open directory", path, errno: code)
                }
            }
            close(current)
            current = next
        }
        return StoreDirectory(fd: current, path: path)
    }

    /// Opens the directory that holds `relativePath` (a path below `root`, '/'
    /// separated) and returns it with the file's name.
    static func openParent(root: String, of relativePath: String, create: Bool, sync: Bool = true) throws -> (StoreDirectory, String) {
        var components = PathBytes.segments(relativePath)
        let name = components.removeLast()
        return (try open(root: root, components, create: create, sync: sync), name)
    }

    private static func kind(of name: String, in fd: Int32) -> mode_t? {
        var st = stat()
        guard fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 else { return nil }
        return st.st_mode & S_IFMT
    }

    func display(_ name: String) -> String { "\(path)/\(name)" }

    /// Whether an entry named `name` exists (symlinks not followed).
    func exists(_ name: String) -> Bool {
        var st = stat()
        return fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0
    }

    /// Writes `bytes` to a new file `name` (which must not exist; never through a
    /// symlink), fsynced unless `sync` is false.
    func writeNew(_ name: String, _ bytes: [UInt8], sync: Bool) throws {
        let file = openat(fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard file >= 0 else { throw SnapError.io("cannot create", display(name), errno: errno) }
        var ok = false
        defer {
            close(file)
            if !ok { unlinkat(fd, name, 0) }
        }
        let code = POSIX.writeAll(file, bytes)
        if code != 0 { throw SnapError.io("cannot write", display(name), errno: code) }
        if sync, fsync(file) != 0 { throw SnapError.io("cannot fsync", display(name), errno: errno) }
        ok = true
    }

    /// A fresh temp name here, for the file `name` (see `Durable.tempName`).
    func tempName(for name: String) -> String { Durable.tempName(for: name) }

    /// `link(2)` within this directory: never replaces. Returns 0 or an errno value.
    func link(_ from: String, _ to: String) -> Int32 {
        linkat(fd, from, fd, to, 0) == 0 ? 0 : errno
    }

    /// Moves the complete file `from` to `to` within this directory, never replacing
    /// anything: renameat2's RENAME_NOREPLACE, one step; where the file system or the
    /// kernel has no such rename (EINVAL, ENOSYS, EOPNOTSUPP), `link(2)` and then an unlink
    /// of `from`, as before. Returns 0 (`from` is gone) or an errno value (EEXIST: `to`
    /// exists; `from` is then still there).
    func moveNew(_ from: String, _ to: String) -> Int32 {
        moveNew(from, to: self, as: to)
    }

    /// `moveNew` into another directory of the same file system, `target`, as `name`.
    func moveNew(_ from: String, to target: StoreDirectory, as name: String) -> Int32 {
        let moved = POSIX.renameExclusive(from: fd, from, to: target.fd, name)
        guard moved == EINVAL || moved == ENOSYS || moved == EOPNOTSUPP else { return moved }
        let linked = linkat(fd, from, target.fd, name, 0) == 0 ? 0 : errno
        if linked == 0 { unlink(from) }
        return linked
    }

    /// `rename(2)` within this directory (replaces `to`). Returns 0 or an errno value.
    func rename(_ from: String, _ to: String) -> Int32 {
        rename(from, to: self, as: to)
    }

    /// `rename(2)` into `target` as `name` (replaces it). Returns 0 or an errno value.
    func rename(_ from: String, to target: StoreDirectory, as name: String) -> Int32 {
        renameat(fd, from, target.fd, name) == 0 ? 0 : errno
    }

    func unlink(_ name: String) { unlinkat(fd, name, 0) }

    /// Reads a whole regular file, or nil if it does not exist. A symlink is refused.
    func readIfExists(_ name: String) throws -> [UInt8]? {
        let file = openat(fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        if file < 0 {
            if errno == ENOENT { return nil }
            if errno == ELOOP {
                throw SnapError(.unsafeName, "\(display(name)) is a symbolic link inside the store; SnapThumb never reads through one")
            }
            throw SnapError.io("cannot open", display(name), errno: errno)
        }
        defer { close(file) }
        var st = stat()
        if fstat(file, &st) == 0, (st.st_mode & S_IFMT) != S_IFREG {
            throw SnapError(.io, "\(display(name)) is not a file (a directory?) and \(StoreBlocked.phrase): SnapThumb never removes what is not its own; remove it to publish this key")
        }
        var out = [UInt8]()
        while true {
            switch POSIX.read(file, capacity: 65536) {
            case .success(let chunk) where chunk.isEmpty: return out
            case .success(let chunk): out += chunk
            case .failure(let code): throw SnapError.io("cannot read", display(name), errno: code.code)
            }
        }
    }

    /// fsync of the directory: makes its new and renamed entries durable.
    func sync() throws {
        guard fsync(fd) == 0 else { throw SnapError.io("cannot fsync directory", path, errno: errno) }
    }

    /// Makes the directory `name` in `target` (open as `targetFD`, shown as `targetPath`) by
    /// way of this one: made here under a temp name (`Durable.tempName`), so that ext4 gives
    /// it this directory's block group without a search, then moved into `target` with
    /// `renameExclusive`, which never replaces anything, an empty directory included; made
    /// durable as a `mkdir` in `target` is (`walk`). Returns 0, or the errno of the step that
    /// failed (EEXIST: `target` has a `name` already); the temp directory is removed then. A
    /// process killed between the two steps leaves it empty here, and `TempFiles.removeStale`
    /// removes it once that process is gone.
    func makeDirectory(_ name: String, movedInto targetFD: Int32, shownAs targetPath: String, sync: Bool) throws -> Int32 {
        let temp = Durable.tempName(for: name)
        guard mkdirat(fd, temp, 0o755) == 0 else { return errno }
        let moved = POSIX.renameExclusive(from: fd, temp, to: targetFD, name)
        if moved != 0 {
            unlinkat(fd, temp, AT_REMOVEDIR)
            return moved
        }
        if sync, fsync(targetFD) != 0 { throw SnapError.io("cannot fsync directory", targetPath, errno: errno) }
        return 0
    }
}


/// The directories below a store's root that every upload writes to (`blobs/sha256`,
/// `manifests`), kept open instead of opened afresh, component by component, for
/// every file (about twenty `openat`/`close` calls per upload). Before each use the
/// path is looked at again without following a symlink (`fstatat`, one per
/// component): while every component is still the directory that was opened, the
/// open descriptor is where the walk from the root would lead; otherwise (a
/// directory removed, replaced, or swapped for a symlink) it is opened again from
/// the root, which refuses a symlink as before.
final class OpenDirectories: Sendable {
    private struct Entry: Sendable {
        let directory: StoreDirectory
        /// Device and inode of each component's directory, from the first.
        let identities: [FileIdentity]
    }
    struct FileIdentity: Equatable, Sendable {
        let device: UInt64
        let inode: UInt64
    }
    private let entries = Mutex<[String: Entry]>([:])
    /// Fan-out directories (`blobs/sha256/<2 hex>`, at most 256) by name, with the parent they
    /// were opened below and their device and inode.
    private struct Child: Sendable {
        let parent: StoreDirectory
        let directory: StoreDirectory
        let identity: FileIdentity
    }
    private let children = Mutex<[String: Child]>([:])
    /// The last fan-out directory this store placed by a plain `mkdir` under a parent with
    /// ext4's top-directory flag, and how many more new ones may be made beside it
    /// (`makeBeside`); nil until the first, and always while `spreadsChildren` is false.
    private struct Anchor: Sendable {
        let parent: StoreDirectory
        let directory: StoreDirectory
        /// Its name in `parent` and what that name led to when it was opened.
        let name: String
        let identity: FileIdentity?
        var left: Int
    }
    private let anchor = Mutex<Anchor?>(nil)
    /// How many new fan-out directories are made beside each one the allocator placed.
    static let besideEachPlaced = 7
    private let spreading = Atomic<Bool>(false)
    /// New fan-out directories this store made beside an anchor (`makeBeside`), for the tests.
    private let besideCount = Atomic<Int>(0)
    var madeBeside: Int { besideCount.load(ordering: .relaxed) }

    init() {}

    /// Whether the fan-out directories' parent has the top-directory flag (`Store.init` set it):
    /// then 1 new fan-out directory in 8 is placed by ext4's allocator, the others beside it.
    var spreadsChildren: Bool {
        get { spreading.load(ordering: .relaxed) }
        set { spreading.store(newValue, ordering: .relaxed) }
    }

    /// The directory `name` below `parent` (a directory from `open`, checked for this use),
    /// created if missing, as `parent.open([name], create: true, …)` opens it: kept open while
    /// the entry `name` in `parent` is still that directory (one `fstatat`, no symlink
    /// followed), opened again otherwise, which refuses a symlink as before. For the fan-out
    /// directories of the blobs, so at most 256 are kept, each open descriptor one of them.
    func child(_ name: String, of parent: StoreDirectory, sync: Bool) throws -> StoreDirectory {
        let current = parent.identity(of: name)
        if let cached = children.withLock({ $0[name] }), cached.parent === parent, current == cached.identity {
            return cached.directory
        }
        let placed = try spreadsChildren && current == nil && !makeBeside(name, in: parent, sync: sync)
        guard let directory = try parent.open([name][...], create: true, sync: sync, missingIsNil: false) else {
            throw SnapError(.internal, "unreachable: a missing directory below \(parent.path) was not reported")
        }
        if placed {
            let anchored = Anchor(parent: parent, directory: directory, name: name, identity: directory.identity, left: Self.besideEachPlaced)
            anchor.withLock { $0 = anchored }
        }
        // Kept with the identity of what was opened: before any later use, the name is checked to
        // lead to exactly that directory. A parent opened anew (its directory removed or
        // replaced) makes every child kept below the old one stale.
        if let identity = directory.identity {
            children.withLock { children in
                children = children.filter { $0.value.parent === parent }
                children[name] = Child(parent: parent, directory: directory, identity: identity)
            }
        }
        return directory
    }

    /// Makes the fan-out directory `name` in `parent` beside the anchor, the last one the
    /// allocator placed (`StoreDirectory.makeDirectory(_:movedInto:…)`, so in the anchor's
    /// block group, without a search). Under the top-directory flag each
    /// `mkdir` in `parent` searches every block group for the emptiest (Orlov's allocator:
    /// 0.12 ms on this VM's 2,016 groups, 23 ms for the 197 fan-out directories of a
    /// 120-snap store); made this way, 7 in 8 cost a `mkdir` and a `rename` in one group,
    /// and a store's blobs still spread over a group per 8 directories, which keeps each
    /// group's recently deleted inodes few (`Store.init`). False when it did not make it:
    /// no anchor yet, or its 7 made, or a step failed (the anchor gone, a file system
    /// without RENAME_NOREPLACE): the caller then makes it in `parent` as before. When
    /// another process made `name` first, true.
    private func makeBeside(_ name: String, in parent: StoreDirectory, sync: Bool) throws -> Bool {
        guard let beside = anchor.withLock({ (anchor: inout Anchor?) -> Anchor? in
            guard let current = anchor, current.parent === parent, current.left > 0 else { return nil }
            anchor!.left -= 1
            return current
        }) else { return false }
        // Only while the anchor is still the fan-out directory of its name here: one moved
        // elsewhere (or replaced) is not written in.
        guard let identity = beside.identity, parent.identity(of: beside.name) == identity else {
            anchor.withLock { $0 = nil }
            return false
        }
        let made = try beside.directory.makeDirectory(name, movedInto: parent.fd, shownAs: parent.path, sync: sync)
        if made == 0 { besideCount.add(1, ordering: .relaxed) }
        return made == 0 || made == EEXIST
    }

    /// `components` (one or two, below `root`) opened as `StoreDirectory.open` does,
    /// from the cache when every component is still the same directory.
    func open(root: String, _ components: ArraySlice<String>, create: Bool, sync: Bool, missingIsNil: Bool) throws -> StoreDirectory? {
        let key = components.joined(separator: "/")
        let paths = Self.paths(root: root, components)
        if let entry = entries.withLock({ $0[key] }), Self.identities(of: paths) == entry.identities {
            return entry.directory
        }
        guard let directory = try StoreDirectory.open(root: root, Array(components), create: create, sync: sync, missingIsNil: missingIsNil) else {
            return nil
        }
        // Kept only when the path still leads to the directory just opened.
        if let identities = Self.identities(of: paths), identities.last == directory.identity {
            entries.withLock { $0[key] = Entry(directory: directory, identities: identities) }
        }
        return directory
    }

    private static func paths(root: String, _ components: ArraySlice<String>) -> [String] {
        var paths: [String] = []
        var path = root.isEmpty ? "." : root
        for component in components {
            path += "/" + component
            paths.append(path)
        }
        return paths
    }

    /// Each path's directory (a symlink at the end is not followed), nil if one is missing or not a directory.
    private static func identities(of paths: [String]) -> [FileIdentity]? {
        var identities: [FileIdentity] = []
        identities.reserveCapacity(paths.count)
        for path in paths {
            var st = stat()
            guard fstatat(AT_FDCWD, path, &st, AT_SYMLINK_NOFOLLOW) == 0, (st.st_mode & S_IFMT) == S_IFDIR else { return nil }
            identities.append(FileIdentity(device: UInt64(st.st_dev), inode: UInt64(st.st_ino)))
        }
        return identities
    }
}

extension StoreDirectory {
    /// Device and inode of the directory `name` in this one (a symlink is not followed); nil if
    /// it is missing or not a directory.
    func identity(of name: String) -> OpenDirectories.FileIdentity? {
        var st = stat()
        guard fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0, (st.st_mode & S_IFMT) == S_IFDIR else { return nil }
        return OpenDirectories.FileIdentity(device: UInt64(st.st_dev), inode: UInt64(st.st_ino))
    }
}
