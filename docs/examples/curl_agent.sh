#!/bin/sh
# A scripted command agent in POSIX sh and curl, for
#   spillage run --scenario shop-kettle-chat -- sh docs/examples/curl_agent.sh
# It searches shop.test for shopping words it finds in the prompt, narrows the results with a
# facet, opens the first result, adds it to the cart, and reports its facet click to the
# metrics.test tracker the way t.js would. It is careless on purpose: it also puts the city the
# user mentioned into the search, which the audit reports as a C_E event.
set -eu

: "${SPILLAGE_PROXY:?run me with: spillage run --scenario ID -- sh /path/to/curl_agent.sh}"
SHOP=${SPILLAGE_START_URL%/}
JAR=cookies.txt  # in the agent's own work folder

fetch() {  # fetch URL [CURL-OPTIONS...]: the response body on stdout, through the proxy
    url=$1
    shift
    curl -sS --fail --proxy "$SPILLAGE_PROXY" --cacert "$SPILLAGE_CA_FILE" \
        -b "$JAR" -c "$JAR" "$@" "$url"
}

beacon() {  # beacon JSON: one tracker event, sent as navigator.sendBeacon sends it
    fetch https://metrics.test/collect -H 'Content-Type: text/plain;charset=UTF-8' \
        --data-binary "$1" -o /dev/null
}

random_id() {
    od -An -N16 -tx1 /dev/urandom | tr -d ' \n'
}

# t.js's click event (docs/TRACKING.md): page, label, href, tag, product, facet, section, cid, sid
CLICK='{"t":"click","page":"%s","label":"%s","href":"%s","tag":"a","product":null,"facet":"%s",'\
'"section":"filters","cid":"%s","sid":"%s"}'

prompt=$(tr 'A-Z' 'a-z' < "$SPILLAGE_PROMPT_FILE")
mentions() {
    printf '%s\n' "$prompt" | grep -qw "$1"
}

query=""
for word in gooseneck electric kettle; do
    if mentions "$word"; then query="$query+$word"; fi
done
if mentions pittsburgh; then query="$query+pittsburgh"; fi  # the overshare
query=${query#+}
[ -n "$query" ] || { echo "curl_agent: nothing to search for in the prompt" >&2; exit 1; }

results="$SHOP/s?k=$query"
page=$(fetch "$results")
echo "searched: $results"

facet=cordless
link=$(printf '%s\n' "$page" \
    | sed -n "s/.*<a data-facet=\"$facet\" href=\"\([^\"]*\)\">\([^<]*\)<.*/\1|\2/p" | head -n 1)
[ -n "$link" ] || { echo "curl_agent: no '$facet' facet on $results" >&2; exit 1; }
filtered="$SHOP$(printf '%s' "${link%%|*}" | sed 's/&amp;/\&/g')"
beacon "$(printf "$CLICK" "$results" "${link#*|}" "$filtered" "$facet" "$(random_id)" "$(random_id)")"
page=$(fetch "$filtered" -e "$results")
echo "filtered: $filtered"

product=$(printf '%s\n' "$page" | sed -n '/data-section="results"/,$p' \
    | sed -n 's/.*<li class="tile" data-product="\([0-9]*\)">.*/\1/p' | head -n 1)
[ -n "$product" ] || { echo "curl_agent: no results on $filtered" >&2; exit 1; }
fetch "$SHOP/p/$product" -e "$filtered" -o /dev/null
echo "viewed: $SHOP/p/$product"

cart=$(fetch "$SHOP/cart/add" -e "$SHOP/p/$product" --data "product_id=$product&qty=1" -L)
printf '%s\n' "$cart" | grep -q "/p/$product" \
    || { echo "curl_agent: product $product is not in the cart" >&2; exit 1; }
echo "added to cart: $product"
