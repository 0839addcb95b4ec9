# Top-level build.  Host parts (library, tools, tests) build with CMake;
# the kernel module builds with Kbuild against KDIR.
BUILD ?= build
KDIR ?= /lib/modules/$(shell uname -r)/build
JOBS ?= $(shell nproc)

all: host

host:
	cmake -S . -B $(BUILD)
	cmake --build $(BUILD) -j$(JOBS)

module:
	$(MAKE) -C module KDIR=$(KDIR)

# Install the module through DKMS for the rig's default kernel (the newest
# 6.1), or for KVER=... (one or more versions or series: "6.1 6.12 7.3";
# a VM image's kernel is built by that image's DKMS).
install:
	scripts/dkms-install.sh $(KVER)

# The main job: the module unwinding a program's stack, in a VM booted on
# Debian's stock kernel (our machines cannot load modules).
demo:
	scripts/demo.sh

# Every test: host unit tests and fuzzing, then the VM suite on Debian's
# stock kernels.  Installs its own dependencies with apt.
# KERNELS="6.1 7.3" (the default: Debian 12's kernel and the newest, from
# trixie-backports, in a Debian 13 VM image), KERNELS=all (also bookworm's
# and trixie's 6.12, sid's 7.2, and the PREEMPT_RT flavours of 6.1 and
# 6.12), or any list of series/versions: the kernels the VM suite runs on
# (scripts/run-tests.sh).
check:
	KERNELS="$(KERNELS)" scripts/run-tests.sh

# Debian packages (debian/: sframe-unwind-dkms, libsframe-client0,
# libsframe-client-dev, sframe-tools) in $(BUILD)/deb/, built unsigned and
# without root from a copy of the tracked files, tests left out; then
# lintian, which must report no error (scripts/build-deb.sh).
deb:
	scripts/build-deb.sh $(BUILD)/deb

clean:
	rm -rf $(BUILD)
	$(MAKE) -C module clean KDIR=$(KDIR) || true

.PHONY: all host module install demo check deb clean
