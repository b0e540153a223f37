"""The observer's view of a request: every part it receives, decoded and normalised the way it could
read it. Capture, guard and audit all read requests through this package, and nothing else decodes
one (docs/AUDIT.md, "What the observer reads").

    reading = read_request(WireRequest(method, url, headers, body))
    reading.pieces        # [Piece(text, where, decodings, raw)]: every text, where it was, how it was hidden
    reading.params        # the query as the site parses it; reading.path, reading.form, reading.document
    reading.unread        # what could not be read (a body past the limit, a stream that does not decode)

No mitmproxy here: the live proxy hands requests over as `WireRequest`s
(proxy/formats/flowrecords.py:wire_request); capture records are read with `WireRequest.of_record`.
"""
