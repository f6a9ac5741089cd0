#!/bin/bash
# The reference solution: a line of exactly width characters fits.
cd /workspace
sed -i 's/+ len(word) < width:/+ len(word) <= width:/' textkit/wrap.py
