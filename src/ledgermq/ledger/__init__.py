"""The DLedger server: a Raft-replicated log served over the remoting protocol."""
