#!/usr/bin/env bash
# scripts/test-cluster.sh start|stop|status [--dir DIR]: the cluster tests' private Slurm (one node,
# this machine: munged, slurmctld, slurmd with their own key, ports and state under DIR, default
# $RCSWEEP_TEST_CLUSTER or /tmp/rcsweep-test-cluster-UID), started to outlive this command, for trying
# `rcsweep plan --emit slurm`, the job scripts and Sweep.submit by hand. start prints the SLURM_CONF
# to export; status exits 0 while it runs (3 when not) and shows sinfo and squeue; stop cancels its
# jobs, stops its daemons and removes DIR. The same code as the tests' (tests/cluster/local_slurm.py).
# PBS: the tests have no PBS server (they run the PBS scripts with the environment one gives).
# docs/CLUSTER.md "Trying the cluster path on one machine".
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
exec /usr/bin/python3 "$here/tests/cluster/local_slurm.py" "$@"
