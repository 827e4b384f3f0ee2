//! attnflow: exact gradient flows, theory checks and paper-style figures for the training
//! dynamics of attention models.
pub mod flow;
