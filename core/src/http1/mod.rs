//! HTTP/1.1.
