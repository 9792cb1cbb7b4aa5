pub mod bench;
pub mod convert;
pub mod formats;
pub mod inspect;
pub mod load;
