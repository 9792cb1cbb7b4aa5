pub mod bench;
pub mod convert;
pub mod inspect;
pub mod load;
