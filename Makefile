# Two commands on a fresh Debian machine with Swift: `make demo` and `make test` (and `make test-system` for the tests
# with real servers and filesystems).
SWIFT ?= swift
# Warnings are errors here and in CI (not in Package.swift, which a versioned dependency may not carry unsafe flags in).
STRICT = -Xswiftc -warnings-as-errors
# systemd: make test checks the units in systemd/ with systemd-analyze (no running systemd needed); zsh, fish:
# the completion tests load inbox's completions in them; bindfs, rclone: real FUSE filesystems (rclone only
# Suggests fuse, which bindfs brings); openssh-server, openssh-client, sshfs: make test-system starts its own sshd
# on loopback and mounts it with sshfs and rclone's sftp backend (Tests/TestSupport/SshServer.swift); python3:
# tests write archives and probe extended attributes with it;
# mmdebstrap, systemd-container, lintian: make test-system boots a clean Debian tree with the package installed
# (Tests/SystemTests/BootedTree.swift) and checks the package. Postfix and procmail are not here: the mail tests run
# them inside that tree, never on this machine (nor maildrop, which would bring exim4: bench-mail-tools installs it
# without what it recommends).
APT_PACKAGES = libinotifytools0-dev nettle-dev libmagic-dev libarchive-dev libsqlite3-dev libgmime-3.0-dev \
	libytnef0-dev libpython3.11-testsuite python3 systemd zsh fish bindfs rclone openssh-server \
	openssh-client sshfs mmdebstrap systemd-container lintian
SUDO = $(shell [ "$$(id -u)" = 0 ] || echo sudo)
DEMO_CONTAINER ?=
# make install: the release binary into $(DESTDIR)$(PREFIX)/bin (inbox-formats, which runs import and backups, into
# $(DESTDIR)$(PREFIX)/libexec/inbox, where inbox looks for it), the system units into $(DESTDIR)$(UNITDIR), the
# user units into $(DESTDIR)$(USERUNITDIR) (both on systemd's search path for PREFIX=/usr/local and /usr), bash,
# zsh and fish completions and the man page (made by the binary) under $(DESTDIR)$(PREFIX)/share.
PREFIX ?= /usr/local
DESTDIR ?=
UNITDIR ?= $(PREFIX)/lib/systemd/system
USERUNITDIR ?= $(PREFIX)/lib/systemd/user
# The units, as paths under systemd/: the services differ between the two managers, the path and timer do not.
SYSTEM_UNITS = inbox-watch@.service inbox-drain@.service inbox-drain@.path inbox-drain@.timer inbox-lmtp.socket inbox-lmtp.service
USER_UNITS = user/inbox-watch@.service user/inbox-watch-all.service user/inbox-drain@.service inbox-drain@.path inbox-drain@.timer user/inbox-lmtp.socket user/inbox-lmtp.service
# The release builds of make bench and make install link the Swift runtime and FoundationEssentials in
# (ARCHITECTURE.md, "Start-up and memory"): `inbox --help` starts about a third faster and the watcher's peak RSS
# is 2-3 MiB lower than with the toolchain's shared libraries, and the installed binary needs no toolchain.
# make test's debug build is left as it is.
# They also link libstdc++ and the unwinder (libgcc_eh) in from their static archives: `.build/static-cxx` holds a
# linker script named libstdc++.so that stands for both, found before the shared one. Then no process loads
# libstdc++.so or libgcc_s.so, whose start-up probes the CPU (traps to the hypervisor in a VM): `inbox --help`
# starts in 2 ms instead of 3, and every process is about 1 MiB smaller.
STATIC_CXX = $(CURDIR)/.build/static-cxx
# They link with the toolchain's lld, for two things gold does not do: relative relocations packed (DT_RELR: 7 KiB
# the loader reads at each start, not 0.9 MiB of RELA) and the functions of Benchmarks/hot-functions.order (those
# the binaries run in their usual work, found by `make hot-functions`) laid out side by side at the front of the
# text, so the pages the kernel maps around each one touched are mostly code that runs. Together about 2.5 MiB
# less RSS for the watcher (ARCHITECTURE.md, "Start-up and memory").
HOT_FUNCTIONS = $(CURDIR)/Benchmarks/hot-functions.order
# They carry no RUNPATH of `$ORIGIN`: every library they load is the system's, and with it the loader first looked
# for each of them beside the binary (29 failed opens at every start, about 3% of `inbox --help`).
# The linker passes over names the code no longer has without a word (one warning each, turned off): each release
# build that uses the file says instead how many of its names the binaries still hold (Benchmarks/order-match), and
# to write it again below 80 %.
RELEASE_SWIFTFLAGS = --static-swift-stdlib --disable-local-rpath -Xswiftc -L$(STATIC_CXX) -Xswiftc -use-ld=lld \
	-Xlinker -z -Xlinker pack-relative-relocs \
	-Xlinker --symbol-ordering-file=$(HOT_FUNCTIONS) -Xlinker --no-warn-symbol-ordering
ORDER_MATCH = bin="$$($(SWIFT) build -c release --show-bin-path)"; \
	Benchmarks/order-match $(HOT_FUNCTIONS) "$$bin/inbox" "$$bin/inbox-formats"
# Every release build starts from an empty release folder: an incremental one can link a module compiled against
# the layout another module's classes had before (cross-module optimization inlines a class's allocation, size
# included, into its callers, and SwiftPM does not recompile them when only a private stored property changed).
# Seen here: `inbox import` aborting at exit with "double free or corruption" after a field was added to EventLog's
# private state, until a clean build (ARCHITECTURE.md, "Start-up and memory"). A clean release build takes about
# a minute and a half here. It builds the two executables alone: Tests/TestSupport, a plain target the test targets
# share, imports Testing, which a release build does not have. The flags after $(RELEASE_BUILD) go to both. The
# removal is synced: on ext4 without a journal, file creations pass over each inode freed in the last minute, or in
# the last six while its inode table is not yet written, which slowed a benchmark's rows right after this build
# (Benchmarks/README.md, "The benchmark's own cost, removed").
RELEASE_BUILD = rm -rf "$$($(SWIFT) build -c release --show-bin-path)" && sync && release_build() { \
	$(SWIFT) build -c release --product inbox "$$@" && $(SWIFT) build -c release --product inbox-formats "$$@"; } && \
	release_build
# Extra flags for the build that make install installs; INSTALL_SWIFTFLAGS= builds one that loads the Swift
# runtime from the toolchain that built it (its RUNPATH).
INSTALL_SWIFTFLAGS ?= $(RELEASE_SWIFTFLAGS)

.PHONY: deps build test test-fast test-system demo lint format clean bench bench-mail bench-tools bench-mail-tools hot-functions release \
	install install-files deb uninstall

# Installs the Debian packages the build and the tests need, only when one is missing, asking nothing.
deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "Installing$$missing"; \
		$(SUDO) apt-get update && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y $$missing; \
	fi

build: deps
	$(SWIFT) build $(STRICT)

# The quick suite every change runs: all but SystemTests. Tests/host-unchanged fails it if it changed this machine's
# Postfix, users or services.
test: deps
	Tests/host-unchanged $(SWIFT) test $(STRICT) --skip SystemTests

# One room's tests, the fast loop while working in one part of the code: ROOM is a folder under Tests/, as
# Sources/ has it (make test-fast ROOM=InboxFormatsTests/LMTP). Its suites and test classes, found by name, run alone;
# its `.long` tests only with INBOX_LONG_TESTS=1.
test-fast: deps
	@[ -n "$(ROOM)" ] && [ -d "Tests/$(ROOM)" ] || { echo "make test-fast ROOM=<a folder under Tests/>" >&2; exit 64; }
	@suites=$$(grep -rhoE '^(@Suite[^)]*\)? *)?(final )?(struct|class) [A-Za-z0-9_]+' Tests/$(ROOM) --include=*.swift \
		| awk '{print $$NF}' | sort -u | paste -sd'|'); \
	[ -n "$$suites" ] || { echo "no tests in Tests/$(ROOM)" >&2; exit 66; }; \
	echo "$(SWIFT) test --filter '\.($$suites)/'"; \
	Tests/host-unchanged $(SWIFT) test $(STRICT) --skip SystemTests --filter "\.($$suites)/"

# The tests that need the real parts (ARCHITECTURE.md, "Folders"): servers they start themselves (sshd on loopback),
# the network and FUSE filesystems mounted over them, and the package (make deb) installed in a clean Debian 12
# tree booted under its own systemd (Tests/SystemTests/BootedTree.swift), where the units and the mail tests with
# Postfix run. As root; each says in one line why it skipped otherwise. A tree a killed run left booted is stopped.
# Then, on their own (they load the machine), the tests marked `.long` (Tests/TestSupport/LongTests.swift), which
# make test skips: each mark's test or suite is picked out by the name that follows it.
test-system: deps deb
	@long=$$(awk 'FNR == 1 { want = 0 } /^[[:space:]]*\/\// { next } /@(Test|Suite)\(\.long/ { want = 1 } \
		want && match($$0, /(func|struct|class) [A-Za-z0-9_]+/) { s = substr($$0, RSTART, RLENGTH); \
		sub(/.* /, "", s); print s; want = 0 }' $$(find Tests -name '*.swift') | sort -u | paste -sd'|'); \
	[ -n "$$long" ] || { echo "no .long tests found in Tests/" >&2; exit 66; }; \
	Tests/host-unchanged env INBOX_DEB="$$(ls .build/inbox_*_$$(dpkg-architecture -qDEB_HOST_ARCH).deb)" \
		$(SWIFT) test $(STRICT) --filter '^SystemTests\.' && \
	Tests/host-unchanged env INBOX_LONG_TESTS=1 $(SWIFT) test $(STRICT) --filter "[./]($$long)[/(]"

# The demo prints how to run the binary again; the command itself is not echoed, nor show-bin-path's warnings.
demo: build
	@"$$($(SWIFT) build --show-bin-path 2>/dev/null)/inbox" $(if $(DEMO_CONTAINER),--container $(DEMO_CONTAINER)) \
		demo --samples SampleAttachments

lint:
	$(SWIFT) format lint --strict --recursive Sources Tests Package.swift

format:
	$(SWIFT) format --in-place --recursive Sources Tests Package.swift

clean:
	rm -rf .build

# The benchmark of ARCHITECTURE.md, "The hot path", and the rows of issue 12 (Benchmarks/run-bench): bursts of inbox watch
# against inotifywait and a raw C mover; start-up with 100,000 files waiting; p99 arrival -> Documents at 1,000 files/s;
# inbox --help and inbox move against mv; 1,000 containers in one inbox watch --root (served, idle CPU, RSS, threads, p99
# over 100 of them, a quiet one while another bursts), each as a ratio to a baseline of the same run. Then the mail
# import's: inbox import against ripmime and munpack on one generated Maildir (Benchmarks/run-mail-bench). inotify-tools,
# ripmime and mpack are installed for them alone, when missing. BENCH_SIZES="10000", BENCH_SECTIONS=burst,cli,... and
# BENCH_CONTAINERS=100 run a subset of the first (Benchmarks/README.md lists every knob), BENCH_MAIL_MESSAGES=1000 a
# smaller Maildir for the second.
bench: deps bench-tools bench-mail-tools $(STATIC_CXX)/libstdc++.so
	$(RELEASE_BUILD) $(RELEASE_SWIFTFLAGS)
	@$(ORDER_MATCH)
	INBOX_BIN="$$($(SWIFT) build -c release --show-bin-path)/inbox" Benchmarks/run-bench
	INBOX_BIN="$$($(SWIFT) build -c release --show-bin-path)/inbox" Benchmarks/run-mail-bench

# The mail-import benchmark alone, its LMTP row too (inbox lmtp beside Dovecot's LMTP server and a C floor of its
# guarantees, Benchmarks/lmtp_bench.py); BENCH_MAIL_LMTP=only runs that row alone, BENCH_MAIL_LMTP=0 leaves it out,
# BENCH_LMTP_MESSAGES=200 makes it quicker.
bench-mail: deps bench-mail-tools $(STATIC_CXX)/libstdc++.so
	$(RELEASE_BUILD) $(RELEASE_SWIFTFLAGS)
	@$(ORDER_MATCH)
	INBOX_BIN="$$($(SWIFT) build -c release --show-bin-path)/inbox" Benchmarks/run-mail-bench

# Benchmarks/hot-functions.order again, from the release build: each usual command and a watcher's burst under
# valgrind's callgrind (Benchmarks/hot-functions). Commit the file it writes.
hot-functions: deps $(STATIC_CXX)/libstdc++.so
	@command -v valgrind >/dev/null 2>&1 || { echo "Installing valgrind"; \
		$(SUDO) apt-get update && $(SUDO) apt-get install -y valgrind; }
	$(RELEASE_BUILD) $(RELEASE_SWIFTFLAGS)
	Benchmarks/hot-functions "$$($(SWIFT) build -c release --show-bin-path)"

# The linker script of RELEASE_SWIFTFLAGS, from where the C compiler keeps the two archives.
$(STATIC_CXX)/libstdc++.so:
	@cc=$$(command -v cc || command -v clang); \
	for archive in libstdc++.a libgcc_eh.a; do \
		path=$$($$cc -print-file-name=$$archive); \
		[ -f "$$path" ] || { echo "$$archive not found (apt-get install libstdc++-12-dev)" >&2; exit 1; }; \
		set -- "$$@" "$$path"; \
	done; \
	mkdir -p "$(STATIC_CXX)" && echo "GROUP ( $$1 $$2 )" > "$@"

bench-tools:
	@command -v inotifywait >/dev/null 2>&1 || { echo "Installing inotify-tools"; \
		$(SUDO) apt-get update && $(SUDO) apt-get install -y inotify-tools; }
	@command -v strace >/dev/null 2>&1 || { echo "Installing strace (the polled row)"; \
		$(SUDO) apt-get update && $(SUDO) apt-get install -y strace; }
	@command -v cc >/dev/null 2>&1 || { echo "make bench needs a C compiler (cc): apt-get install gcc" >&2; exit 1; }

# The mail benchmark's baselines, each installed only when missing; strace counts the LMTP row's syncs. Dovecot's
# LMTP server through Benchmarks/install-dovecot-lmtpd, which leaves no system Dovecot running or enabled.
bench-mail-tools:
	@missing=""; command -v ripmime >/dev/null 2>&1 || missing="$$missing ripmime"; \
	command -v munpack >/dev/null 2>&1 || missing="$$missing mpack"; \
	command -v maildrop >/dev/null 2>&1 || missing="$$missing maildrop"; \
	command -v strace >/dev/null 2>&1 || missing="$$missing strace"; \
	if [ -n "$$missing" ]; then \
		echo "Installing$$missing"; \
		$(SUDO) apt-get update && $(SUDO) apt-get install -y --no-install-recommends $$missing; \
	fi
	@SUDO="$(SUDO)" Benchmarks/install-dovecot-lmtpd
	@command -v cc >/dev/null 2>&1 || { echo "make bench-mail needs a C compiler (cc): apt-get install gcc" >&2; exit 1; }

# The release build that make install and make deb install (INSTALL_SWIFTFLAGS).
release: deps $(STATIC_CXX)/libstdc++.so
	$(RELEASE_BUILD) $(INSTALL_SWIFTFLAGS)
	@$(if $(findstring symbol-ordering-file,$(INSTALL_SWIFTFLAGS)),$(ORDER_MATCH))

# Builds in release and installs the binary and the units (ExecStart pointed at $(PREFIX)/bin). Then, for a
# container you own: systemctl --user daemon-reload; systemctl --user enable --now "inbox-watch@$$(systemd-escape
# --path DIR).service" (README.md, "Running as a service").
install: release
	$(MAKE) install-files

# What make install installs, from the release build already made.
install-files:
	install -D -m 0755 "$$($(SWIFT) build -c release --show-bin-path)/inbox" "$(DESTDIR)$(PREFIX)/bin/inbox"
	install -D -m 0755 "$$($(SWIFT) build -c release --show-bin-path)/inbox-formats" \
		"$(DESTDIR)$(PREFIX)/libexec/inbox/inbox-formats"
	install -d -m 0755 "$(DESTDIR)$(UNITDIR)" "$(DESTDIR)$(USERUNITDIR)"
	for unit in $(SYSTEM_UNITS); do \
		sed 's|/usr/local/bin/inbox|$(PREFIX)/bin/inbox|g' "systemd/$$unit" > "$(DESTDIR)$(UNITDIR)/$${unit##*/}" && \
		chmod 0644 "$(DESTDIR)$(UNITDIR)/$${unit##*/}" || exit 1; \
	done
	for unit in $(USER_UNITS); do \
		sed 's|/usr/local/bin/inbox|$(PREFIX)/bin/inbox|g' "systemd/$$unit" > "$(DESTDIR)$(USERUNITDIR)/$${unit##*/}" && \
		chmod 0644 "$(DESTDIR)$(USERUNITDIR)/$${unit##*/}" || exit 1; \
	done
	bin="$$($(SWIFT) build -c release --show-bin-path)/inbox"; \
	install -d -m 0755 "$(DESTDIR)$(PREFIX)/share/bash-completion/completions" \
		"$(DESTDIR)$(PREFIX)/share/zsh/site-functions" "$(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d" \
		"$(DESTDIR)$(PREFIX)/share/man/man1" && \
	"$$bin" completions bash > "$(DESTDIR)$(PREFIX)/share/bash-completion/completions/inbox" && \
	"$$bin" completions zsh > "$(DESTDIR)$(PREFIX)/share/zsh/site-functions/_inbox" && \
	"$$bin" completions fish > "$(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/inbox.fish" && \
	"$$bin" man > "$(DESTDIR)$(PREFIX)/share/man/man1/inbox.1"

# The Debian package, .build/inbox_VERSION_ARCH.deb (debian/, README.md, "Install"): debian/rules runs make release
# and make install-files into the package's tree with Debian's places (/usr/bin, /usr/libexec/inbox,
# /usr/lib/systemd/...). Installs debhelper when missing; needs no root (Rules-Requires-Root: no).
deb: deps
	@command -v dh >/dev/null 2>&1 || { echo "Installing debhelper"; \
		$(SUDO) apt-get update && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y debhelper; }
	dpkg-checkbuilddeps
	@# dh skips the build while its stamp of an earlier one is there: the package would hold that build's binaries.
	rm -f debian/debhelper-build-stamp
	debian/rules binary
	@ls .build/inbox_*_$$(dpkg-architecture -qDEB_HOST_ARCH).deb

uninstall:
	for unit in $(notdir $(SYSTEM_UNITS)); do rm -f "$(DESTDIR)$(UNITDIR)/$$unit"; done
	for unit in $(notdir $(USER_UNITS)); do rm -f "$(DESTDIR)$(USERUNITDIR)/$$unit"; done
	rm -f "$(DESTDIR)$(PREFIX)/bin/inbox" "$(DESTDIR)$(PREFIX)/libexec/inbox/inbox-formats" \
		"$(DESTDIR)$(PREFIX)/share/bash-completion/completions/inbox" "$(DESTDIR)$(PREFIX)/share/zsh/site-functions/_inbox" \
		"$(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/inbox.fish" "$(DESTDIR)$(PREFIX)/share/man/man1/inbox.1"
