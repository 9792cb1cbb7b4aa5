pub mod bench;
pub mod inspect;
