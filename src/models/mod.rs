pub mod diagonal;
pub mod histogram;
pub mod kq;
pub mod network;
pub mod prompt;
pub mod token_select;
