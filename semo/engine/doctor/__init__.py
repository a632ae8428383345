"""`semo supabase doctor`: check a Supabase project for what semo needs (docs/SUPABASE.md)."""
