#!/bin/bash
# The verifier: the hidden tests, uploaded to /tests only in the
# verifier's container; reward 1 when they all pass.
cd /workspace
if python3 -m pytest -q -rA -p no:cacheprovider /tests/test_outputs.py; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
