#!/bin/sh
# Starts two cleave-run processes as an external launcher would:
#   launch-two.sh torchrun|mpi STORE_DIR CLEAVE_RUN ARGS...
# Rank 1 runs in the background (its output goes to STORE_DIR/rank1.log);
# rank 0's output is this script's. Exits non-zero if either rank fails.
style=$1 store=$2 run=$3
shift 3
export CLEAVE_RENDEZVOUS="file:$store" CLEAVE_RUN_ID="$style-$$" \
  CLEAVE_TIMEOUT_MS=60000
rank_env() {
  if [ "$style" = mpi ]; then
    echo "OMPI_COMM_WORLD_RANK=$1 OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_RANK=$1 OMPI_COMM_WORLD_LOCAL_SIZE=2"
  else
    echo "RANK=$1 WORLD_SIZE=2 LOCAL_RANK=$1 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1"
  fi
}
env $(rank_env 1) "$run" "$@" > "$store/rank1.log" 2>&1 &
other=$!
env $(rank_env 0) "$run" "$@"
status=$?
wait $other || { echo "rank 1 failed:"; cat "$store/rank1.log"; exit 1; }
exit $status
