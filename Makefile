# Two commands on a fresh Debian machine with Swift: `make demo` and `make test`.
SWIFT ?= swift
APT_PACKAGES = libinotifytools0-dev libssl-dev libmagic-dev
SUDO = $(shell [ "$$(id -u)" = 0 ] || echo sudo)
DEMO_CONTAINER ?=

.PHONY: deps build test demo lint format clean

# Installs the Debian packages the build links against, only when one is missing.
deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "Installing$$missing"; \
		$(SUDO) apt-get update && $(SUDO) apt-get install -y $$missing; \
	fi

build: deps
	$(SWIFT) build

test: deps
	$(SWIFT) test

demo: build
	$$($(SWIFT) build --show-bin-path)/inbox $(if $(DEMO_CONTAINER),--container $(DEMO_CONTAINER)) demo --samples SampleAttachments

lint:
	$(SWIFT) format lint --strict --recursive Sources Tests Package.swift

format:
	$(SWIFT) format --in-place --recursive Sources Tests Package.swift

clean:
	rm -rf .build
