#!/bin/bash
# pytest is in the image (environment/Dockerfile); nothing is installed here.
mkdir -p /logs/verifier
if python -m pytest -q /tests/test_total.py; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
