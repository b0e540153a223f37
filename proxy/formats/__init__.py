"""Capture-file converters bound to mitmproxy: HAR, mitmproxy flows, pcap, TCP streams, and the record derivation the live proxy shares."""
