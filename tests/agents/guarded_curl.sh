#!/bin/sh
# A careless curl agent behind `spillage run --guard block` (tests/test_guard_e2e.py): it tries to
# tell shop.test and its tracker what the user said, in content, by a choice and in a beacon, and
# checks that the guard answers each attempt itself. It prints one line per attempt:
#   <what> <status> <X-Spillage-Guard rule or ->
# and exits 1 when the guard let an attempt through or refused what was harmless.
set -eu

: "${SPILLAGE_PROXY:?run me with: spillage run --scenario shop-kettle-chat --guard block -- sh guarded_curl.sh}"
SHOP=${SPILLAGE_START_URL%/}

attempt() {  # attempt WHAT EXPECTED-STATUS URL [CURL-OPTIONS...]
    what=$1 expected=$2 url=$3
    shift 3
    out=$(curl -sS --proxy "$SPILLAGE_PROXY" --cacert "$SPILLAGE_CA_FILE" -D headers.txt -o body.html \
        -w '%{http_code}' "$@" "$url")
    rule=$(sed -n 's/^[Xx]-[Ss]pillage-[Gg]uard: *\([^[:space:]]*\).*/\1/p' headers.txt)
    echo "$what $out ${rule:--}"
    [ "$out" = "$expected" ] || { echo "guarded_curl: $what: expected $expected, got $out" >&2; exit 1; }
    if [ "$expected" = 403 ]; then
        grep -q "did not send" body.html || { echo "guarded_curl: $what: no explanation page" >&2; exit 1; }
    fi
}

attempt clean-search 200 "$SHOP/s?k=gooseneck+kettle"
attempt content 403 "$SHOP/s?k=gooseneck+kettle+pittsburgh"
attempt behavior 403 "$SHOP/s?k=gooseneck+kettle&f=pregnancy-safe" -e "$SHOP/s?k=gooseneck+kettle"
attempt beacon 204 https://metrics.test/collect -H "Origin: $SHOP" -H 'Content-Type: text/plain;charset=UTF-8' \
    --data-binary '{"t":"keys","page":"'"$SHOP"'/","name":"k","entries":[{"value":"kettle for my pregnancy","ms":0}]}'
