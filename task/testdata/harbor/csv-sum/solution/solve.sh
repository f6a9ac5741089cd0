#!/bin/bash
cat > /app/total.py <<'PY'
import csv
print(sum(int(r["amount"]) for r in csv.DictReader(open("/app/data.csv"))))
PY
