//! llmbench-model: the bottom of the launcher's layers. What one request's measurement is ([`record`]), what is
//! known of it as it goes out ([`sent`]), and the clocks that take it: the wall clock ([`wallclock`]), sleeps that
//! wake on time ([`timer`]) and the kernel's receive stamps ([`rx_stamp`]). It imports no other llmbench crate.
#![forbid(unsafe_code)]

pub mod inference_perf;
pub mod record;
pub mod record_file;
pub mod rx_stamp;
pub mod sent;
pub mod timer;
pub mod wallclock;
