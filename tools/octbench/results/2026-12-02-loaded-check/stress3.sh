#!/bin/bash
# three make check runs in a row beside stress-ng --cpu 2, on a clean clone of main
rm -rf /tmp/s3 && git clone -q /work/main /tmp/s3 && cd /tmp/s3 || exit 1
git log --oneline -1 > /tmp/s3-head.txt
stress-ng --cpu 2 --timeout 0 >/tmp/s3-stress.log 2>&1 &
SP=$!
echo "stress-ng pid $SP" >> /tmp/s3-head.txt
for i in 1 2 3; do
  echo "run $i start $(date -u +%T)" >> /tmp/s3-head.txt
  if [ $i = 1 ]; then .ci/run > /tmp/s3-run$i.log 2>&1; else make check > /tmp/s3-run$i.log 2>&1; fi
  rc=$?
  echo "run $i end $(date -u +%T) rc $rc" >> /tmp/s3-head.txt
  [ $rc = 0 ] || break
done
kill $SP; pkill stress-ng; pkill -f build/.*/tests/ ; pkill -x octd; pkill -x octsim
echo done >> /tmp/s3-head.txt
