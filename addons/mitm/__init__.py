"""What runs mitmproxy: the CA and the mitmdump command line."""
