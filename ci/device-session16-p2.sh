#!/usr/bin/env bash
# Session 16: racecheck and memcheck of the fused forward + backward with P = 2 and P = 4
# loopback ranks (the forward's task descriptions in the ring and GEMM2 row tables across ranks),
# and the megakernel golden check.
#   OUT=dir bash ci/device-session16-p2.sh     (carry .devdeps)
source "$(dirname "$0")/device-call.sh"
step build
build_device detmoe
B=build-device
for tool in racecheck memcheck; do
  sanitize_verify $tool --shape small --routing hot:0.5 --P 2 --backend loopback
  sanitize_verify $tool --shape small-shared --routing zipf1 --P 4 --backend loopback
done
step golden
timeout 100 $B/detmoe golden check --impl megakernel 2>&1 | tail -1
step done
